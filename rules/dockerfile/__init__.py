"""Dockerfile rules (NPU820-NPU829), run by ``npu_migrate/dockerfile/`` on the
instructions; ``RUN``/``ENV``/``CMD``/``ENTRYPOINT`` also go through the shell rules."""

FRONT_END = "dockerfile"
