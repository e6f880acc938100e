"""FlashAttention on Ascend, decided from the project's facts (NPU920, NPU936, NPU940).

``attn_implementation="flash_attention_2"`` loads the CUDA flash-attn package on
transformers older than 4.51; 4.51 and later map it on the NPU to
``torch_npu.npu_fusion_attention`` (``integrations/npu_flash_attention.py``), the
varlen path included. ``"sdpa"`` works on every release but lets packed sequences
attend to each other (TRL's "contamination" warning): packed or padding-free
training on sdpa runs and is silently wrong. So, for a flash-attention value:

1. ``KEEP`` where every transformers requirement of the project admits only
   releases >= 4.51 (``==5.15``, ``>=4.53.3``, ``~=4.51``; project fact
   ``transformers_specifier``, from any dependency file, whatever files the run
   was given): it already runs on the NPU; nothing to do.
2. ``PACKED`` where the same file configures packing or padding-free training
   (``packing: true``, ``padding_free: true``, ``--packing``,
   ``DataCollatorWithFlattening``, code that chooses the attention for packed
   samples): never ``sdpa``; reported.
3. ``REWRITE`` (to ``sdpa``) otherwise.
"""

from __future__ import annotations

import re
from enum import Enum

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

#: The first transformers release that maps flash_attention_2 to the NPU's fused attention.
NPU_FLASH_ATTENTION = Version("4.51")


class Attention(Enum):
    KEEP = "keep"
    PACKED = "packed"
    REWRITE = "rewrite"


#: A key or option that turns packing / padding-free batches on, with a true value
#: (``packing: true``, ``"padding_free": true``, ``--packing True``, ``--padding_free``,
#: ``packing=True``, ``neat_packing: true``, nanotron's ``_use_doc_masking: true``: packed
#: documents masked from each other by flash-attn's varlen kernels; verl's
#: ``use_remove_padding: True``, ``rmpad``: rows unpadded into one varlen batch, round 20).
_PACKING_ON = re.compile(
    rb"""(?:^|[\s{,("'-])-{0,2}["']?(?:\w*_)?(?:packing|padding_free|pack_sequences?|doc_masking|document_masking|remove_padding|rmpad)["']?"""
    rb"""(?:(?:[ \t]*[:=][ \t]*|[ \t]+)["']?(?:true|yes|on|1)\b|(?=[ \t]*(?:\\?\r?\n|$|[ \t]--)))""",
    re.IGNORECASE | re.MULTILINE,
)
#: Code that builds packed, padding-free batches or picks the attention for them (verl's
#: ``use_remove_padding`` and flash-attn's ``unpad_input``: round 20).
_PACKING_CODE = re.compile(
    rb"DataCollatorWithFlattening|\bpadding_free\b|\b\w*packing\w*\b|\bpack_sequences?\b|\bcu_seqlens\w*\b"
    rb"|\b\w*doc(?:ument)?_masking\b|\b\w*remove_padding\b|\b\w*rmpad\w*\b|\bunpad_input\b")


def packing_configured(data: bytes, *, code: bool = False) -> bool:
    """``data`` (a config file, a launcher, or with ``code`` a Python file) configures
    packed or padding-free training."""
    if code:
        return _PACKING_CODE.search(data) is not None
    return _PACKING_ON.search(data) is not None


def admits_only_npu_flash_attention(specifiers: str) -> bool | None:
    """``specifiers`` (the project's transformers requirements, ``;``-separated, one
    per dependency file) admit only releases >= 4.51: True; some older release: False;
    no version named anywhere: None."""
    found = [s.strip() for s in specifiers.split(";") if s.strip()]
    if not found:
        return None
    for text in found:
        lower = _lower_bound(text)
        if lower is None or lower < NPU_FLASH_ATTENTION:
            return False
    return True


def _lower_bound(text: str) -> Version | None:
    """The smallest release ``text`` (``>=4.53.3,<5``, ``==5.15``, ``==4.53.*``) admits,
    as far as its clauses say; None when nothing bounds it from below."""
    try:
        specifier = SpecifierSet(text)
    except InvalidSpecifier:
        return None
    bounds = []
    for clause in specifier:
        if clause.operator in (">=", ">", "==", "~=", "==="):
            try:
                bounds.append(Version(clause.version.rstrip(".*")))
            except InvalidVersion:
                continue
    return max(bounds) if bounds else None


def decide(specifiers: str, data: bytes, *, code: bool = False) -> Attention:
    """What to do with a flash-attention value in a file holding ``data``."""
    if admits_only_npu_flash_attention(specifiers):
        return Attention.KEEP
    if packing_configured(data, code=code):
        return Attention.PACKED
    return Attention.REWRITE


PACKED_MESSAGE = ("packed / padding-free training is configured here: sdpa would let packed sequences attend to "
                  "each other (training runs and is silently wrong)")
PACKED_SUGGESTION = ("keep flash_attention_2 and require transformers>=4.51, which maps it to "
                     "torch_npu.npu_fusion_attention on Ascend (varlen path included); or turn packing off and use sdpa")
