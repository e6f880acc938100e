"""Shell launcher rules (NPU800-NPU819), run by ``npu_migrate/shell/`` on ``*.sh``,
``*.bash``, sh/bash scripts by shebang, and the shell in Dockerfiles."""

FRONT_END = "shell"
