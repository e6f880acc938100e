"""The emulated Ascend NPU: run migrated training scripts on CPU.

``npu-migrate emulate SCRIPT`` (or ``python -m npu_migrate.emulate SCRIPT``)
runs a script with a stand-in ``torch_npu`` importable. The stand-in registers
a real PrivateUse1 device named ``npu`` (a small C++ extension, built once and
cached) so that ``.npu()``, ``device="npu:0"``, ``torch.autocast("npu")``,
``torch.load(map_location="npu:0")`` and ``init_process_group("hccl")`` execute,
train on CPU, and fail like hardware does on migration bugs (a tensor left on
CPU, a leftover ``.cuda()``).

The stand-in package lives in :data:`SITE_DIR`, which is never on ``sys.path``
by itself; the launcher prepends it to ``PYTHONPATH`` of the processes it
starts. See docs/emulator.md.
"""

from __future__ import annotations

from pathlib import Path

#: Directory holding the stand-in ``torch_npu`` package (put on PYTHONPATH by the launcher).
SITE_DIR = Path(__file__).resolve().parent / "site"

__all__ = ["SITE_DIR"]
