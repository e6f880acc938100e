"""What torch-npu really offers, read from the generated table (never imports torch).

The table ``npu_migrate/data/torch_npu_api.json`` is produced by
``scripts/gen_torch_npu_api.py`` from the published torch-npu wheel. Rules ask it
before emitting a ``torch.npu.*`` / ``torch_npu.*`` name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

_TABLE = "torch_npu_api.json"


@dataclass(frozen=True)
class NpuApi:
    version: str
    modules: Mapping[str, frozenset[str]]
    unusable: Mapping[str, str]
    env_vars: frozenset[str]

    def has(self, qualified_name: str) -> bool:
        """True if ``qualified_name`` (a module or an attribute of one) exists in torch-npu."""
        if qualified_name.startswith("torch_npu.npu."):  # torch.npu is torch_npu.npu
            qualified_name = "torch.npu." + qualified_name[len("torch_npu.npu.") :]
        if qualified_name in self.modules:
            return True
        module, _, name = qualified_name.rpartition(".")
        return bool(module) and name in self.modules.get(module, ())

    def unusable_reason(self, qualified_name: str) -> str | None:
        return self.unusable.get(qualified_name)

    def npu_name_for_cuda(self, cuda_qualified_name: str) -> str | None:
        """``torch.cuda.X[.Y]`` -> ``torch.npu.X[.Y]`` when that exists and may be emitted."""
        prefix = "torch.cuda."
        if cuda_qualified_name == "torch.cuda":  # the module itself: hasattr(torch.cuda, ...), mod = torch.cuda
            return "torch.npu" if "torch.npu" in self.modules else None
        if not cuda_qualified_name.startswith(prefix):
            return None
        candidate = "torch.npu." + cuda_qualified_name[len(prefix) :]
        if self.has(candidate) and candidate not in self.unusable:
            return candidate
        return None


@functools.cache
def load_api() -> NpuApi:
    raw = json.loads(
        resources.files("npu_migrate.data").joinpath(_TABLE).read_text("utf-8")
    )
    modules = {key: frozenset(names) for key, names in raw["modules"].items()}
    return NpuApi(
        version=raw["torch_npu_version"],
        modules=MappingProxyType(modules),
        unusable=MappingProxyType(dict(raw["unusable"])),
        env_vars=frozenset(raw["env_vars"]),
    )
