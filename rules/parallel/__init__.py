"""Data parallelism (NPU8xx): `nn.DataParallel` and, on request, single-device scripts
made DDP over HCCL that still run as one process."""
