"""npu-migrate: CUDA -> Ascend NPU source migration."""
