"""Findings for what has no automatic migration (NPU9xx): CUDA-only libraries,
custom CUDA kernels, DataParallel, torch.compile with inductor."""
