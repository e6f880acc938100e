"""Data files shipped with npu-migrate (generated tables)."""
