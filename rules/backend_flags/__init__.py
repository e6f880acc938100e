"""Backend flags: TF32, cudnn, SDP kernels, nvidia-smi (NPU6xx)."""
