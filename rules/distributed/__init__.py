"""Distributed rules: NCCL -> HCCL (NPU2xx)."""
