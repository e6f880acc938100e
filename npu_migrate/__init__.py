"""npu-migrate: CUDA -> Ascend NPU source migration."""

__version__ = "0.1.0"
