"""npu_runtime."""
