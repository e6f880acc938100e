"""Classes that are CUDA-only code as a whole; their edits, of every rule, are dropped and
reported once, at the first of them (NPU011):

* a class that subclasses a CUDA-only library's class (``bnb.nn.Linear8bitLt``, a
  flash-attn or apex module): every object of it runs that library's kernels
  (LLM-Adapters' vendored peft ``Linear8bitLt`` LoRA layers: held-out round 18, 6
  needless hunks and the imports that served them). The base is what the owner ports
  (or drops) first;
* the flash-attention variant of a class of the same file, as vendored Hugging Face
  modeling files have it (``class LlamaFlashAttention2(LlamaAttention)``, named
  ``Flash...``, whose code calls flash-attn): it exists to run that kernel, and
  transformers' mapping of ``flash_attention_2`` onto NPU fusion attention covers
  transformers' own classes, not a copy (Bunny's four language models, round 18).
  On Ascend the project selects the file's other variant (sdpa or eager), which is
  migrated as usual.

A library counts when :class:`npu_migrate.python.cuda_only.FileIndex` resolves the name
to a package with no Ascend path; a name only written like one, a capability probe,
``DataParallel`` and the like do not. A training class that calls flash-attn itself is
not one of these: its call is what gets ported, and its device code is migrated for it.
"""

from __future__ import annotations

import ast

from npu_migrate.python import cuda_only
from npu_migrate.python.context import FileContext
from npu_migrate.python.records import Edit, FindingRecord

RULE = "NPU011"
#: Kinds that say a name is not a kernel library's class.
_NOT_A_KERNEL_BASE = frozenset({
    cuda_only.KIND_DATA_PARALLEL, cuda_only.KIND_EXTENSION_BUILD, cuda_only.KIND_NAMED_PACKAGE,
    cuda_only.KIND_CAPABILITY, cuda_only.KIND_CUDA_VERSION, cuda_only.KIND_CUDA_METHOD,
    cuda_only.KIND_NCCL_COMMUNICATOR,
})


def kernel_classes(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """``edits`` without those inside such classes, and the findings for them."""
    index = cuda_only.file_index(ctx) if edits else None
    if index is None:
        return edits, []
    classes = []
    class_defs = [node for node in ast.walk(index.tree) if isinstance(node, ast.ClassDef)]
    defined = {node.name for node in class_defs}
    for node in class_defs:
        base = next((use for use in map(index._use, node.bases)
                     if use is not None and use.kind not in _NOT_A_KERNEL_BASE), None)
        if base is not None:
            classes.append((node.lineno, node.end_lineno or node.lineno, node.name,
                            f"subclasses `{base.name}` ({base.kind})"))
            continue
        if "Flash" in node.name and any(isinstance(b, ast.Name) and b.id in defined for b in node.bases):
            use = index.first_use(node.body, skip=_NOT_A_KERNEL_BASE)
            if use is not None:
                why = f"is the flash-attention variant of a class of this file: it calls `{use.name}` ({use.kind})"
                classes.append((node.lineno, node.end_lineno or node.lineno, node.name, why))
    if not classes:
        return edits, []
    kept, first = [], {}
    for edit in edits:
        number = line(edit.anchor)
        holder = next((c for c in classes if c[0] <= number <= c[1]), None)
        if holder is None:
            kept.append(edit)
        elif holder not in first or number < line(first[holder].anchor):
            first[holder] = edit
    findings = [
        FindingRecord(RULE, edit.anchor,
                      f"`{name}` {why}; its code is left as it is",
                      "on Ascend use the file's other variant, or port that library's part first and run "
                      "npu-migrate again")
        for (_, _, name, why), edit in first.items()
    ]
    return kept, findings
