#!/usr/bin/env python3
"""Generate ``npu_migrate/data/torch_npu_api.json`` from a published torch-npu wheel.

The codemod may only emit ``torch.npu.*`` / ``torch_npu.*`` names that exist in the
targeted torch-npu release. This script reads the wheel *statically*: it unzips it,
parses the Python sources with :mod:`ast`, reads the op-plugin YAML and scans the
shared libraries for environment-variable literals. It never imports torch_npu
(doing so needs CANN and breaks ``import torch`` on machines without it).

Usage::

    python scripts/gen_torch_npu_api.py                      # pip download torch-npu==2.13.0
    python scripts/gen_torch_npu_api.py --version 2.14.0
    python scripts/gen_torch_npu_api.py --wheel /tmp/torch_npu-2.13.0-...whl
    python scripts/gen_torch_npu_api.py --wheel W --output /tmp/api.json

Only the standard library is used, so it runs in any Python >= 3.10.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GENERATED_BY = "scripts/gen_torch_npu_api.py"
DEFAULT_VERSION = "2.13.0"
DEFAULT_OUTPUT = (
    Path(__file__).resolve().parent.parent
    / "npu_migrate"
    / "data"
    / "torch_npu_api.json"
)

# Names that exist but must never be emitted as the rewrite of the same-named CUDA API.
# Keep this small; every entry needs a reason a reviewer can check in the wheel.
UNUSABLE: dict[str, str] = {
    "torch.npu.get_device_capability": (
        "returns None (with a warning) unless TORCH_NPU_DEVICE_CAPABILITY is set; "
        "the value is a user-configured placeholder, not the hardware's (torch_npu/npu/__init__.py)"
    ),
    "torch.npu.amp.custom_fwd": (
        "deprecated with a FutureWarning in torch_npu/npu/amp/autocast_mode.py; "
        "use torch.amp.custom_fwd(..., device_type='npu')"
    ),
    "torch.npu.amp.custom_bwd": (
        "deprecated with a FutureWarning in torch_npu/npu/amp/autocast_mode.py; "
        "use torch.amp.custom_bwd(..., device_type='npu')"
    ),
    "torch.npu.DoubleTensor": (
        "torch_npu's own transfer_to_npu maps torch.cuda.DoubleTensor to torch.npu.FloatTensor "
        "because float64 is not supported (torch_npu/contrib/transfer_to_npu.py)"
    ),
}

# Names listed in a module's __all__ that no Python source binds because C++ creates them
# at torch_npu._C._initExtension(). Evidence: torch_npu itself uses torch.npu.FloatTensor
# (npu/amp/grad_scaler.py, contrib/transfer_to_npu.py) and libtorch_npu.so carries the
# "torch.npu" module name and torch's "torch.tensortype" metaclass name.
CPP_BOUND: dict[str, frozenset[str]] = {
    "torch_npu.npu": frozenset(
        f"{t}Tensor"
        for t in (
            "Bool",
            "Byte",
            "Char",
            "Double",
            "Float",
            "Half",
            "Int",
            "Long",
            "Short",
            "BFloat16",
        )
    ),
}

# Output key -> dotted module inside the wheel, for modules read with the generic reader.
MODULES: dict[str, str] = {
    "torch.npu": "torch_npu.npu",
    "torch.npu.amp": "torch_npu.npu.amp",
    "torch.npu.memory": "torch_npu.npu.memory",
    "torch.npu.random": "torch_npu.npu.random",
    "torch.npu.graphs": "torch_npu.npu.graphs",
    "torch.npu.streams": "torch_npu.npu.streams",
    "torch.npu.utils": "torch_npu.npu.utils",
    "torch_npu.optim": "torch_npu.optim",
    "torch_npu.utils": "torch_npu.utils",
    "torch_npu.contrib": "torch_npu.contrib",
    "torch_npu.distributed": "torch_npu.distributed",
    "torch_npu.profiler": "torch_npu.profiler",
}

# Modules whose exported classes get their members listed too (``torch_npu.profiler.ProfilerActivity.NPU``):
# output key -> dotted module inside the wheel.
CLASS_MEMBER_MODULES: dict[str, str] = {"torch_npu.profiler": "torch_npu.profiler"}

# Config objects living in torch.npu whose attributes are answered by __getattr__/__setattr__.
CONFIG_OBJECTS = ("matmul", "conv", "config")

ENV_PREFIXES = ("HCCL_", "TORCH_HCCL_", "ASCEND_", "TORCH_NPU_", "PYTORCH_NPU_")
_ENV_RE = re.compile(r"^(?:" + "|".join(ENV_PREFIXES) + r")[A-Z0-9_]+$")
# Literals in the .so files that match the prefixes but are not environment variables.
_NOT_ENV = frozenset({"HCCL_SUCCESS"})
_ENV_BYTES_RE = re.compile(
    rb"(?<![A-Za-z0-9_])((?:"
    + b"|".join(p.encode() for p in ENV_PREFIXES)
    + rb")[A-Z0-9_]+)\x00"
)


class Package:
    """Static view of the Python sources under an unzipped wheel directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, ast.Module | None] = {}
        self._public_cache: dict[str, set[str]] = {}
        self.warnings: list[str] = []

    # -- locating modules ------------------------------------------------------------
    def path_of(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def is_package(self, module: str) -> bool:
        return self.root.joinpath(*module.split("."), "__init__.py").is_file()

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.path_of(module)
            self._trees[module] = (
                ast.parse(path.read_text("utf-8-sig"), str(path)) if path else None
            )
        return self._trees[module]

    def submodules(self, module: str) -> set[str]:
        if not self.is_package(module):
            return set()
        directory = self.root.joinpath(*module.split("."))
        names = set()
        for child in directory.iterdir():
            if child.name.startswith("_"):
                continue
            if child.suffix == ".py" or (child / "__init__.py").is_file():
                names.add(child.stem if child.suffix == ".py" else child.name)
        return names

    def resolve(self, module: str, level: int, target: str | None) -> str:
        if level == 0:
            return target or ""
        parts = module.split(".")
        if not self.is_package(module):
            parts = parts[:-1]
        parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
        return ".".join(parts + ([target] if target else []))

    # -- reading one module ------------------------------------------------------------
    def dunder_all(self, module: str) -> list[str] | None:
        tree = self.tree(module)
        if tree is None:
            return None
        names: list[str] | None = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = list(_literal_strings(node.value))
            elif (
                isinstance(node, ast.AugAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "__all__"
            ):
                names = (names or []) + list(_literal_strings(node.value))
        return names

    def public_names(
        self, module: str, also_bound: frozenset[str] = frozenset()
    ) -> set[str]:
        """Public attributes of ``module`` once imported, as far as the sources show.

        ``also_bound``: names known to be bound by other means (export tables, C++).
        """
        if module in self._public_cache:
            return self._public_cache[module]
        self._public_cache[module] = set()  # break import cycles
        tree = self.tree(module)
        if tree is None:
            return set()
        listed = self.dunder_all(module)
        bound, own = self._bindings(module, tree)
        names = {n for n in own if not n.startswith("_")}
        names |= self.submodules(module)
        names |= _getattr_names(tree)
        if listed is not None:
            cpp = CPP_BOUND.get(module, frozenset()) | also_bound
            for name in listed:
                if name in bound or name in names or name in cpp:
                    names.add(name)
                else:
                    self.warnings.append(
                        f"{module}.__all__ lists {name!r} but no source binds it; left out"
                    )
        self._public_cache[module] = names
        return names

    def _bindings(self, module: str, tree: ast.Module) -> tuple[set[str], set[str]]:
        """(every bound name, names that count as this module's own public API)."""
        bound: set[str] = set()
        own: set[str] = set()
        for node in _top_level(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
                own.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                for target in targets:
                    for name in _target_names(target):
                        bound.add(name)
                        if name != "__all__":
                            own.add(name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                source = self.resolve(module, node.level, node.module)
                internal = node.level > 0 or source.split(".")[0] == "torch_npu"
                for alias in node.names:
                    if alias.name == "*":
                        if internal:
                            star = self.star_names(source)
                            bound |= star
                            own |= star
                        continue
                    name = alias.asname or alias.name
                    bound.add(name)
                    # Relative imports re-export; absolute ones are helpers unless in __all__.
                    if node.level > 0:
                        own.add(name)
        return bound, own

    def star_names(self, module: str) -> set[str]:
        listed = self.dunder_all(module)
        if listed is not None:
            return set(listed)
        return {
            n for n in self.public_names(module) if n not in self.submodules(module)
        }

    def config_attributes(self, module: str, object_name: str) -> set[str]:
        """Attributes a config object answers in its class's __getattr__/__setattr__."""
        tree = self.tree(module)
        if tree is None:
            return set()
        class_ref = None
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(
                    isinstance(t, ast.Name) and t.id == object_name
                    for t in node.targets
                )
                and isinstance(node.value, ast.Call)
            ):
                class_ref = node.value.func
        if class_ref is None:
            return set()
        if isinstance(class_ref, ast.Attribute) and isinstance(
            class_ref.value, ast.Name
        ):
            owner, class_name = (
                self.resolve(module, 1, class_ref.value.id),
                class_ref.attr,
            )
        elif isinstance(class_ref, ast.Name):
            owner, class_name = module, class_ref.id
        else:
            return set()
        owner_tree = self.tree(owner)
        if owner_tree is None:
            return set()
        names: set[str] = set()
        for node in owner_tree.body:
            if isinstance(node, ast.ClassDef) and node.name == class_name:
                for method in node.body:
                    if isinstance(method, ast.FunctionDef) and method.name in (
                        "__getattr__",
                        "__setattr__",
                    ):
                        names |= _compared_strings(method)
        return names

    def iter_sources(self):
        for path in sorted(self.root.rglob("*.py")):
            rel = path.relative_to(self.root).as_posix()
            try:
                yield rel, ast.parse(path.read_text("utf-8-sig"), rel)
            except (SyntaxError, UnicodeDecodeError):
                self.warnings.append(f"could not parse {rel}")


# -- small AST helpers ------------------------------------------------------------------
def _literal_strings(node: ast.AST):
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                yield element.value
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _literal_strings(node.left)
        yield from _literal_strings(node.right)


def _target_names(target: ast.AST):
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def _top_level(body):
    """Module-level statements, descending into try/if blocks (import fallbacks)."""
    for node in body:
        if isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        else:
            yield node


def _compared_strings(function: ast.FunctionDef) -> set[str]:
    """String constants compared with the function's attribute-name parameter."""
    params = [a.arg for a in function.args.args if a.arg not in ("self", "cls")]
    if not params:
        return set()
    param = params[0]
    found = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == param
        ):
            for op, right in zip(node.ops, node.comparators):
                if (
                    isinstance(op, ast.Eq)
                    and isinstance(right, ast.Constant)
                    and isinstance(right.value, str)
                ):
                    found.add(right.value)
                elif isinstance(op, ast.In):
                    found |= set(_literal_strings(right))
    return found


def _getattr_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return {n for n in _compared_strings(node) if not n.startswith("_")}
    return set()


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def class_members(pkg: Package, module: str, exported: set[str]) -> dict[str, set[str]]:
    """Members of the classes ``module`` exports, by exported name: the public class-level
    assignments of a Python class (enum members, constants), and, for a class that
    C++ binds (imported from ``torch_npu._C``), the attributes the wheel's own sources
    read from it (``ProfilerActivity.NPU`` in torch_npu/npu/memory.py)."""
    tree = pkg.tree(module)
    members: dict[str, set[str]] = {}
    for node in _top_level(tree.body if tree else []):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = pkg.resolve(module, node.level, node.module)
        for alias in node.names:
            local = alias.asname or alias.name
            if local not in exported or alias.name == "*":
                continue
            if source.startswith("torch_npu._C"):
                found = _attributes_read_from(pkg, alias.name)
            else:
                found = _class_assignments(pkg.tree(source), alias.name)
            if found:
                members[local] = found
    return members


def _class_assignments(tree: ast.Module | None, name: str) -> set[str]:
    for node in tree.body if tree else []:
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = set()
            for item in node.body:
                targets = item.targets if isinstance(item, ast.Assign) else (
                    [item.target] if isinstance(item, ast.AnnAssign) else [])
                for target in targets:
                    found |= {n for n in _target_names(target) if not n.startswith("_")}
            return found
    return set()


def _attributes_read_from(pkg: Package, name: str) -> set[str]:
    """``M`` of every ``torch_npu.<...>.name.M`` read in the wheel's Python sources, and of
    ``name.M`` in files that import ``name`` from torch_npu (not torch's namesake enum).
    The opt-in CUDA patcher transfer_to_npu.py counts: it reads the values it maps to."""
    found = set()
    for _rel, tree in pkg.iter_sources():
        own = any(
            isinstance(node, ast.ImportFrom)
            and (node.level > 0 or (node.module or "").split(".")[0] == "torch_npu")
            and any(alias.name == name and alias.asname is None for alias in node.names)
            for node in ast.walk(tree)
        )
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and not node.attr.startswith("_")
            ):
                owner = _dotted(node.value) or ""
                if (owner == name and own) or (
                    owner.startswith("torch_npu.") and owner.endswith("." + name)
                ):
                    found.add(node.attr)
    return found


# -- wheel-specific extractors ---------------------------------------------------------------
def custom_op_names(root: Path) -> set[str]:
    """Op names of the ``custom:`` section of the op-plugin YAML (registered as torch.ops.npu.*)."""
    names: set[str] = set()
    for yaml_path in sorted(root.glob("torch_npu/csrc/aten/*.yaml")):
        section = None
        for line in yaml_path.read_text("utf-8").splitlines():
            header = re.match(r"^([A-Za-z_]+):", line)
            if header:
                section = header.group(1)
                continue
            if section == "custom":
                m = re.match(
                    r"^\s*-?\s*func:\s*([A-Za-z0-9_]+)(?:\.[A-Za-z0-9_]+)?\(", line
                )
                if m:
                    names.add(m.group(1))
    return names


def public_op_list(pkg: Package) -> set[str]:
    """``public_npu_functions`` (the ops torch_npu appends to its __all__)."""
    tree = pkg.tree("torch_npu.utils.exposed_api")
    names: set[str] = set()
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "public_npu_functions"
            for t in node.targets
        ):
            names |= set(_literal_strings(node.value))
    return names


def documented_ops(pkg: Package) -> set[str]:
    """First argument of every ``_add_torch_npu_docstr("name", ...)`` call."""
    tree = pkg.tree("torch_npu._op_plugin_docs")
    names: set[str] = set()
    for node in ast.walk(tree) if tree else []:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "_add_torch_npu_docstr"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value.split(".")[0])
    return names


def export_table_names(pkg: Package) -> set[str]:
    """Keys of ``_LAZY_PYTHON_SYMBOLS`` and ``globals_dict["X"] = ...`` in the export module."""
    tree = pkg.tree("torch_npu._init.core._exports")
    names: set[str] = set()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id == "_LAZY_PYTHON_SYMBOLS"
                    and isinstance(node.value, ast.Dict)
                ):
                    names |= {
                        k.value for k in node.value.keys if isinstance(k, ast.Constant)
                    }
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "globals_dict"
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    names.add(target.slice.value)
    return names


def torch_distributed_aliases(pkg: Package) -> set[str]:
    """Names torch_npu puts on ``torch.distributed`` (its public-API alias table)."""
    tree = pkg.tree("torch_npu._init.patches.distributed_patches")
    names: set[str] = set()
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_PUBLIC_API_ALIASES"
            for t in node.targets
        ):
            for element in getattr(node.value, "elts", []):
                if (
                    isinstance(element, ast.Tuple)
                    and element.elts
                    and isinstance(element.elts[0], ast.Constant)
                ):
                    parts = str(element.elts[0].value).split(".")
                    if (
                        len(parts) == 2
                        and parts[0] == "distributed"
                        and not parts[1].startswith("_")
                    ):
                        names.add(parts[1])
    return names


def privateuse1_methods(pkg: Package) -> dict[str, set[str]]:
    """Methods torch's ``generate_methods_for_privateuse1_backend`` adds, per flag passed."""
    tree = pkg.tree("torch_npu._init.registry.backend")
    result: dict[str, set[str]] = {}
    if tree is None:
        return result
    backend = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func) or ""
            if (
                name.endswith("rename_privateuse1_backend")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                backend = node.args[0].value
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith(
            "generate_methods_for_privateuse1_backend"
        ):
            flags = {
                kw.arg: kw.value.value
                for kw in node.keywords
                if isinstance(kw.value, ast.Constant)
            }
            if backend is None:
                continue
            if flags.get("for_tensor", True):
                result.setdefault("torch.Tensor", set()).update(
                    {backend, f"is_{backend}"}
                )
            if flags.get("for_module", True):
                result.setdefault("torch.nn.Module", set()).add(backend)
            if flags.get("for_storage", False):
                for cls in ("torch.TypedStorage", "torch.UntypedStorage"):
                    result.setdefault(cls, set()).update({backend, f"is_{backend}"})
    return result


def attribute_assignments(pkg: Package) -> dict[str, set[str]]:
    """``torch_npu.X = ...`` and ``torch.ops.npu.X`` references found anywhere in the sources.

    transfer_to_npu.py is skipped: it monkey-patches CUDA names and is opt-in.
    """
    out: dict[str, set[str]] = {"torch_npu": set(), "torch.ops.npu": set()}
    for rel, tree in pkg.iter_sources():
        if rel.endswith("contrib/transfer_to_npu.py") or "/testing/" in f"/{rel}":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    dotted = (
                        _dotted(target) if isinstance(target, ast.Attribute) else None
                    )
                    if (
                        dotted
                        and dotted.count(".") == 1
                        and dotted.startswith("torch_npu.")
                    ):
                        out["torch_npu"].add(dotted.split(".")[1])
            elif isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if (
                    dotted
                    and dotted.startswith("torch.ops.npu.")
                    and dotted.count(".") == 3
                ):
                    out["torch.ops.npu"].add(node.attr)
    return out


def env_vars(pkg: Package) -> set[str]:
    """Env var names the Python sources read, plus NUL-terminated literals in the .so files."""
    found: set[str] = set()
    for _rel, tree in pkg.iter_sources():
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Call) and node.args:
                func = _dotted(node.func) or ""
                if func.endswith(
                    ("getenv", "environ.get", "environ.setdefault", "environ.pop")
                ):
                    key = node.args[0]
            elif isinstance(node, ast.Subscript) and (
                _dotted(node.value) or ""
            ).endswith("environ"):
                key = node.slice
            elif (
                isinstance(node, ast.Compare)
                and len(node.comparators) == 1
                and isinstance(node.ops[0], (ast.In, ast.NotIn))
                and (_dotted(node.comparators[0]) or "").endswith("environ")
            ):
                key = node.left
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and _ENV_RE.match(key.value)
            ):
                found.add(key.value)
    for so in sorted(pkg.root.rglob("*.so*")):
        if so.is_file():
            found |= {
                m.group(1).decode() for m in _ENV_BYTES_RE.finditer(so.read_bytes())
            }
    return found - _NOT_ENV


# -- assembling the table ---------------------------------------------------------------------
def extract(root: Path, version: str) -> dict:
    """Build the API table from an unzipped wheel directory (the one holding ``torch_npu/``)."""
    pkg = Package(root)
    if pkg.path_of("torch_npu") is None:
        raise SystemExit(f"{root} does not contain torch_npu/__init__.py")
    modules: dict[str, set[str]] = {}
    for key, module in MODULES.items():
        if pkg.path_of(module) is not None:
            modules[key] = set(pkg.public_names(module))
    for key, module in CLASS_MEMBER_MODULES.items():
        for name, members in class_members(pkg, module, modules.get(key, set())).items():
            modules[f"{key}.{name}"] = members
    for name in CONFIG_OBJECTS:
        attributes = pkg.config_attributes("torch_npu.npu", name)
        if attributes:
            modules[f"torch.npu.{name}"] = attributes

    ops = custom_op_names(root)
    public_ops = public_op_list(pkg)
    assigned = attribute_assignments(pkg)
    modules["torch.ops.npu"] = ops | assigned["torch.ops.npu"]
    exported = frozenset(export_table_names(pkg))
    top = (
        set(pkg.public_names("torch_npu", also_bound=exported)) | exported | public_ops
    )
    top |= {
        n
        for n in ops | documented_ops(pkg) | assigned["torch_npu"]
        if not n.startswith("_")
    }
    modules["torch_npu"] = {n for n in top if not n.startswith("_") or n in public_ops}

    distributed = torch_distributed_aliases(pkg)
    if distributed:
        modules["torch.distributed"] = distributed
    for key, names in privateuse1_methods(pkg).items():
        modules[key] = names

    missing = sorted(n for n in UNUSABLE if not _has(modules, n))
    if missing:
        pkg.warnings.append(
            f"UNUSABLE names absent from this wheel (dropped): {missing}"
        )
    table = {
        "torch_npu_version": version,
        "generated_by": GENERATED_BY,
        "modules": {key: sorted(names) for key, names in sorted(modules.items())},
        "unusable": {k: v for k, v in sorted(UNUSABLE.items()) if k not in missing},
        "env_vars": sorted(env_vars(pkg)),
    }
    for warning in sorted(set(pkg.warnings)):
        print(f"warning: {warning}", file=sys.stderr)
    return table


def _has(modules: dict[str, set[str]], qualified: str) -> bool:
    module, _, name = qualified.rpartition(".")
    return name in modules.get(module, ())


def wheel_version(wheel: Path) -> str:
    # torch_npu-2.13.0-cp311-... -> 2.13.0
    return wheel.name.split("-")[1]


def download_wheel(version: str, dest: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            f"torch-npu=={version}",
            "-d",
            str(dest),
        ],
        check=True,
    )
    wheels = sorted(dest.glob("torch_npu-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no torch_npu wheel in {dest}")
    return wheels[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--version",
        default=DEFAULT_VERSION,
        help="torch-npu version to download (default %(default)s)",
    )
    parser.add_argument(
        "--wheel", type=Path, help="use this wheel instead of downloading"
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torch_npu_api_") as tmp:
        tmp_path = Path(tmp)
        wheel = args.wheel or download_wheel(args.version, tmp_path / "dl")
        version = wheel_version(wheel) if args.wheel else args.version
        unpacked = tmp_path / "unpacked"
        with zipfile.ZipFile(wheel) as zf:
            members = [
                m
                for m in zf.namelist()
                if m.startswith("torch_npu/") and m.endswith((".py", ".yaml", ".so"))
            ]
            zf.extractall(unpacked, members)
        table = extract(unpacked, version)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", "utf-8")
    counts = ", ".join(f"{k}={len(v)}" for k, v in table["modules"].items())
    print(f"wrote {args.output}: {counts}; env_vars={len(table['env_vars'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
