"""Dependency-file rules: the ``deps`` front end, ``npu_migrate/deps/``."""

FRONT_END = "deps"
