"""Profiling rules: torch.profiler -> torch_npu.profiler, CUDA-only profiler options and metrics."""
