"""Diagnose a failed Ascend training job from its logs (standard library only).

``python -m npu_runtime.diagnose LOG...`` and ``npu-migrate diagnose LOG...`` are the
same program: the training image has the runtime and not the migration tool. It reads
plain log files, ``-`` (standard input) and directories (CANN's plog folders), finds
the failure signatures of ``signatures.py`` and says, for each, the cause, where the
evidence is, what it means, what to do and whether an automatic restart can help.
"""

from __future__ import annotations

from .scan import Diagnosis, diagnose_lines, diagnose_paths
from .signatures import SIGNATURES, Signature

__all__ = ["SIGNATURES", "Diagnosis", "Signature", "diagnose_lines", "diagnose_paths"]
