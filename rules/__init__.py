"""Rule families. Installed as ``npu_migrate.rules``."""
