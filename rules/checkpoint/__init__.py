"""Checkpoint rules: GradScaler state in checkpoints, `torch.load` of CUDA-saved files."""
