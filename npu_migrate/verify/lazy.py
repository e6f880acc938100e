"""Patches applied when a module is imported, not before (npu_migrate/verify/hook.py and
cuda_on_npu.py): importing FSDP eagerly costs every run about 0.7 s of CPU
(``torch.distributed.tensor``), for the few scripts that use it. Imports nothing heavy."""

from __future__ import annotations

import sys

#: Where FullyShardedDataParallel is defined (torch.distributed.fsdp re-exports it).
FSDP_MODULE = "torch.distributed.fsdp.fully_sharded_data_parallel"
#: Where FSDP2's ``fully_shard`` is defined (torch.distributed.fsdp re-exports it; the
#: HF Trainer's FSDP, through accelerate, is FSDP2 since transformers 5).
FSDP2_MODULE = "torch.distributed.fsdp._fully_shard._fully_shard"


#: Patches waiting for their module's import: {module name: [patch, ...]}, in the order given.
_PENDING: dict[str, list] = {}


class _AfterImport:
    """A meta path finder (one per process) that runs the patches waiting for a module
    right after the module is executed, before the import that loads it returns."""

    def find_spec(self, fullname, path, target=None):
        patches = _PENDING.pop(fullname, None)
        if patches is None:
            return None
        spec = None
        later = sys.meta_path[sys.meta_path.index(self) + 1:] if self in sys.meta_path else sys.meta_path
        for finder in later:  # the finder that would have found it without us
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            for patch in patches:
                patch(module)

        loader.exec_module = exec_module
        return spec


_FINDER = _AfterImport()


def after_import(name: str, patch) -> None:
    """``patch(module)`` once ``name`` is imported: now if it already is, else right after
    its import (the patch is in place before anyone can use the module's names)."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    _PENDING.setdefault(name, []).append(patch)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
