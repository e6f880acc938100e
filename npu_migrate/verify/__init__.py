"""``npu-migrate verify``: prove a migration step by step, before writing it.

The project is copied twice to a scratch directory: the *migrated twin* (the
normal migration, run on the emulated NPU or a real one) and the *reference twin*
(the original source on the same device, its CUDA calls served by it: cuda_on_npu.py).
Both run the same script, arguments and seeds for N optimizer steps through a
hook that records losses, gradient norms and parameter digests; the comparison
gives a verdict, the first diverging step, msprobe's metrics and a report.
See docs/verify.md. Only the child processes (hook.py, cuda_on_npu.py, cuda_on_cpu.py) import torch.
"""
