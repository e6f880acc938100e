"""Hugging Face Hub kernels named as an attention implementation (plain data, shared
by the Python, shell and config rules of this family)."""

from __future__ import annotations

import re

#: a Hub repository id, optionally with a revision and a kernel name (``org/repo@rev:name``)
HUB_KERNEL = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(?:@[\w.-]+)?(?::[\w.-]+)?")
ROUTE = ('use attn_implementation="sdpa" (transformers runs flash attention on Ascend through torch_npu\'s '
         "npu_fusion_attention: \"flash_attention_2\" maps to it from 4.51 on), or keep the Hub kernel only if its "
         "repository publishes a CANN build (see NPU927)")
