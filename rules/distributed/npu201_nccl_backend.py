"""NPU201: the ``nccl`` process-group backend becomes ``hccl``."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import Assignment

from npu_migrate.python.cst_util import (
    call_arg,
    string_literal,
    string_value,
    with_string_value,
)
from npu_migrate.python.rule import Example, Rule
from npu_migrate.tables.backends import mentions_nccl

from ._common import ARGPARSE_BACKEND_OPTIONS, BACKEND_NCCL, BACKEND_PARAMS, GET_BACKEND

#: keyword arguments and dict keys that name a process-group backend in any API
#: (torch, Lightning's ``process_group_backend``, accelerate's ``InitProcessGroupKwargs``...)
BACKEND_KEYWORDS = frozenset({"backend", "dist_backend", "process_group_backend", "ddp_backend", "distributed_backend"})
ENV_DEFAULT = frozenset({"os.environ.get", "os.getenv"})
_MAX_DEPTH = 6

SUGGESTION = (
    "on Ascend the collective backend is 'hccl' (composite form 'cpu:gloo,npu:hccl'); "
    "if this string names a process-group backend or is compared with one, change it to 'hccl'"
)


class NcclBackend(Rule):
    id = "NPU201"
    name = "nccl-backend"
    summary = "Use the `hccl` backend wherever code passes, defaults or compares the `nccl` process-group backend"
    triggers = ("nccl", "NCCL")
    targets = ("npu", "cpu")
    rationale = """
NCCL does not exist on Ascend; torch_npu registers the `hccl` backend for the
`npu` device (`torch_npu/_init/registry/distributed.py` calls
`Backend.register_backend("hccl", ..., devices=["npu"])`). This rule rewrites the
backend where it can be identified for sure:

- the `backend` argument of `init_process_group`, `new_group`, `new_subgroups`,
  `new_subgroups_by_enumeration` (keyword or positional, through any import
  alias) and DeepSpeed's `init_distributed(dist_backend=...)`;
- through a local variable or parameter default (`backend = "nccl"` then
  `init_process_group(backend=backend)`), a conditional
  (`"nccl" if torch.cuda.is_available() else "gloo"`), `x or "nccl"` and
  `os.environ.get("BACKEND", "nccl")`;
- the composite form: `"cpu:gloo,cuda:nccl"` becomes `"cpu:gloo,npu:hccl"`;
- keyword arguments and dict entries named `backend`, `dist_backend`,
  `process_group_backend`, `ddp_backend`, `distributed_backend`
  (Lightning's `DDPStrategy(process_group_backend=...)`, accelerate's
  `InitProcessGroupKwargs(backend=...)`, config dicts);
- the argparse default (and `choices`) of `--backend` / `--dist-backend` /
  `--dist_backend` / `--ddp-backend`, so `init_process_group(backend=args.dist_backend)` works;
- `dist.Backend.NCCL` becomes the string `"hccl"` (the same value that
  `Backend.HCCL` has once torch_npu registers the backend, without relying on an
  attribute that plain torch lacks);
- comparisons with `dist.get_backend()`: `dist.get_backend() == "nccl"` becomes
  `== "hccl"`, otherwise NCCL-only code paths are silently skipped on NPU.

Every other string that is exactly a backend spec naming nccl (`"nccl"`,
`"NCCL"`, `"cuda:nccl"`), for example a comparison with a config value, is
reported rather than rewritten: the tool cannot tell what it is compared with.
`torch_npu.contrib.transfer_to_npu` only patches the `init_process_group` and
`new_group` arguments at run time and leaves such comparisons alone.
"""
    examples = (
        Example(
            "import torch.distributed as dist\ndist.init_process_group('nccl', init_method='env://')\n",
            "import torch.distributed as dist\nimport torch_npu  # noqa: F401\ndist.init_process_group('hccl', init_method='env://')\n",
        ),
        Example(
            'import torch\nfrom torch.distributed import init_process_group\nbackend = "nccl" if torch.cuda.is_available() else "gloo"\ninit_process_group(backend=backend)\n',
            'import torch\nimport torch_npu  # noqa: F401\nfrom torch.distributed import init_process_group\nbackend = "hccl" if torch.cuda.is_available() else "gloo"\ninit_process_group(backend=backend)\n',
        ),
        Example(
            'import torch.distributed as dist\nif dist.get_backend() == "nccl":\n    pass\n',
            'import torch.distributed as dist\nimport torch_npu  # noqa: F401\nif dist.get_backend() == "hccl":\n    pass\n',
        ),
        Example("import torch.distributed as dist\ndist.init_process_group('gloo')\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.sources: list[cst.BaseExpression] = []
        self.literals: list[cst.SimpleString] = []
        self.fixed: set[cst.CSTNode] = set()

    # -- collection during the pass ---------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in BACKEND_PARAMS:
            keyword, position = BACKEND_PARAMS[qualified]
            arg = call_arg(node, keyword, position)
            if arg is not None:
                self.sources.append(arg.value)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
            self._argparse(node)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in BACKEND_KEYWORDS:
                self.sources.append(arg.value)

    def _argparse(self, node: cst.Call) -> None:
        flags = [string_value(a.value) for a in node.args if a.keyword is None and not a.star]
        if not any(f is not None and f.lstrip("-") in ARGPARSE_BACKEND_OPTIONS for f in flags):
            return
        default = call_arg(node, "default")
        if default is not None:
            self.sources.append(default.value)
        choices = call_arg(node, "choices")
        if choices is not None and isinstance(choices.value, (cst.List, cst.Tuple, cst.Set)):
            for element in choices.value.elements:
                self.sources.append(element.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if string_value(node.key) in BACKEND_KEYWORDS:
            self.sources.append(node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        if not any(isinstance(o, cst.Call) and self.qualified_name(o.func) in GET_BACKEND for o in operands):
            return
        for operand in operands:
            if isinstance(operand, (cst.Tuple, cst.List, cst.Set)):
                self.sources.extend(e.value for e in operand.elements)
            elif isinstance(operand, (cst.SimpleString, cst.Name)):
                self.sources.append(operand)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.qualified_name(node) in BACKEND_NCCL:
            backend = self.ctx.target.backend
            self.replace(node, string_literal(backend, self.ctx.quote), f"`Backend.NCCL` -> `\"{backend}\"`")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and mentions_nccl(value):
            self.literals.append(node)

    # -- decisions once the whole file has been seen ----------------------------------

    def leave_file(self) -> None:
        for source in self.sources:
            self._resolve(source, 0)
        for literal in self.literals:
            if literal not in self.fixed:
                self.report(literal, f"{literal.value} names the NCCL backend, which Ascend does not have", SUGGESTION)

    def _resolve(self, node: cst.CSTNode, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, cst.SimpleString):
            self._fix(node)
        elif isinstance(node, cst.IfExp):
            self._resolve(node.body, depth + 1)
            self._resolve(node.orelse, depth + 1)
        elif isinstance(node, cst.BooleanOperation):
            self._resolve(node.left, depth + 1)
            self._resolve(node.right, depth + 1)
        elif isinstance(node, cst.Call) and self.qualified_name(node.func) in ENV_DEFAULT:
            default = call_arg(node, "default", 1)
            if default is not None:
                self._resolve(default.value, depth + 1)
        elif isinstance(node, cst.Name) and self.qualified_name(node) is None:
            for value in self._assigned_values(node):
                self._resolve(value, depth + 1)

    def _assigned_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        """Values a local variable or parameter can hold, when every binding of it
        is a plain assignment or a parameter default."""
        scope = self.ctx.scope(name)
        if scope is None:
            return []
        values = []
        for assignment in scope[name.value]:
            if not isinstance(assignment, Assignment):
                return []
            target = assignment.node
            if isinstance(target, cst.Param):
                if target.default is not None:
                    values.append(target.default)
                continue
            parent = self.ctx.parent(target)
            if isinstance(parent, cst.AssignTarget):
                statement = self.ctx.parent(parent)
                if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                    values.append(statement.value)
                    continue
            if isinstance(parent, cst.AnnAssign) and parent.target is target and parent.value is not None:
                values.append(parent.value)
                continue
            return []  # bound some other way (loop, tuple unpacking, walrus...): cannot tell
        return values

    def _fix(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        new = self.ctx.target.backend_string(value) if value is not None else None
        if new is None or node in self.fixed:
            return
        self.fixed.add(node)
        self.replace(node, lambda n: with_string_value(n, new), f"backend {value!r} -> {new!r}")
