"""AMP rules: torch.cuda.amp -> torch.amp with "npu" (NPU3xx)."""
