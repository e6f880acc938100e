"""Config-file rules (YAML, JSON, TOML): the ``config`` front end, ``npu_migrate/configs/``."""

FRONT_END = "config"
