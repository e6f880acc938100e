"""Injection of the npu_runtime shim (NPU7xx)."""
