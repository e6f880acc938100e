"""NPU201: the ``nccl`` process-group backend becomes ``hccl``."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import (
    call_arg,
    last_name,
    string_literal,
    string_value,
    with_string_value,
)
from npu_migrate.python.imports import guard_text
from npu_migrate.python.reaches_torch import OTHER_SYSTEMS
from npu_migrate.python.rule import Example, Rule
from npu_migrate.tables.backends import mentions_nccl, other_systems_owner

from ._common import ARGPARSE_BACKEND_OPTIONS, BACKEND_NCCL, BACKEND_PARAMS, GET_BACKEND

#: the file starts process groups itself (torch.distributed's calls, or a library's that
#: take the backend: DeepSpeed's init_distributed, Lightning's strategies), so the HCCL name
#: needs torch_npu registered in this process
_STARTS_GROUPS = re.compile(r"init_process_group|new_group|init_device_mesh|DeviceMesh|torch\.distributed|"
                            r"from torch import distributed|init_distributed|process_group_backend|dist_backend|"
                            r"Strategy\(|Accelerator\(|Trainer\(|Fabric\(")

#: serialisers whose output is another program's configuration, not torch's
_SERIALISERS = frozenset({"json.dumps", "json.dump", "yaml.dump", "yaml.safe_dump"})
#: collective libraries other than torch.distributed, called by name (ray.util.collective)
_OTHER_COLLECTIVES = frozenset({"init_collective_group", "create_collective_group"})
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
    #: a backend held in an attribute may be assigned in one function and passed in another
    local_triggers = ("nccl", "NCCL", "init_process_group", "new_group", "new_subgroups", "init_distributed")
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
  `init_process_group(backend=backend)`), an attribute assigned in the same file
  (`args.dist_backend = 'nccl'` then `init_process_group(backend=args.dist_backend)`,
  the `init_distributed_mode` of torchvision's reference scripts), a conditional
  (`"nccl" if torch.cuda.is_available() else "gloo"`), `x or "nccl"` and
  `os.environ.get("BACKEND", "nccl")`;
- the composite form: `"cpu:gloo,cuda:nccl"` becomes `"cpu:gloo,npu:hccl"`;
- names, attributes and subscripts named that way (`args.dist_backend = 'nccl'`
  in a file that starts no process group itself, `cfg["backend"] = "nccl"`,
  `DIST_BACKEND = "nccl"` in a config module, `backend: str = "nccl"` in a
  dataclass), and a class field of any name read at the call through an object
  (`comm_backend: str = "nccl"` ... `init_process_group(backend=cfg.comm_backend)`);
- keyword arguments and dict entries named `backend`, `dist_backend`,
  `process_group_backend`, `ddp_backend`, `distributed_backend`
  (Lightning's `DDPStrategy(process_group_backend=...)`, config dicts);
  not accelerate's `InitProcessGroupKwargs(backend="nccl")`: that is the field's
  default, which `to_kwargs()` drops so that accelerate picks the backend itself
  (hccl on Ascend); an explicit "hccl" breaks a single-process run (held-out
  round 21), so it is reported and left;
- the argparse default (and `choices`) of `--backend` / `--dist-backend` /
  `--dist_backend` / `--ddp-backend`, so `init_process_group(backend=args.dist_backend)` works;
- `dist.Backend.NCCL` becomes the string `"hccl"` (the same value that
  `Backend.HCCL` has once torch_npu registers the backend, without relying on an
  attribute that plain torch lacks);
- comparisons with `dist.get_backend()`: `dist.get_backend() == "nccl"` becomes
  `== "hccl"`, otherwise NCCL-only code paths are silently skipped on NPU;
- comparisons with a name whose every nccl value in this file is rewritten
  (`backend = "nccl" if torch.cuda.is_available() else "gloo"` then `if backend ==
  "nccl":`), which must test the value the name now holds.

Every other string that is exactly a backend spec naming nccl (`"nccl"`,
`"NCCL"`, `"cuda:nccl"`), for example a comparison with a config value, is
reported rather than rewritten: the tool cannot tell what it is compared with.
A table that already names the NPU's backend (`{"cuda": "nccl", "npu": "hccl"}`,
timm's device-to-backend map) is NPU-aware and neither rewritten nor reported.
`torch_npu.contrib.transfer_to_npu` only patches the `init_process_group` and
`new_group` arguments at run time and leaves such comparisons alone.
"""
    examples = (
        # accelerate's default: dropped by to_kwargs(), accelerate picks hccl itself (reported)
        Example('from accelerate.utils import InitProcessGroupKwargs\nkwargs = InitProcessGroupKwargs(backend="nccl")\n'),
        Example(
            "import torch.distributed as dist\ndist.init_process_group('nccl', init_method='env://')\n",
            (
                "import torch.distributed as dist\n"
                "\n"
                + guard_text() +
                "\n"
                "dist.init_process_group('hccl', init_method='env://')\n"
            ),
        ),
        Example(
            'import torch\nfrom torch.distributed import init_process_group\nbackend = "nccl" if torch.cuda.is_available() else "gloo"\ninit_process_group(backend=backend)\n',
            (
                "import torch\n"
                "from torch.distributed import init_process_group\n"
                "\n"
                + guard_text() +
                "\n"
                'backend = "hccl" if torch.cuda.is_available() else "gloo"\n'
                "init_process_group(backend=backend)\n"
            ),
        ),
        Example(
            'import torch.distributed as dist\nif dist.get_backend() == "nccl":\n    pass\n',
            (
                "import torch.distributed as dist\n"
                "\n"
                + guard_text() +
                "\n"
                'if dist.get_backend() == "hccl":\n'
                "    pass\n"
            ),
        ),
        Example(
            "import torch.distributed as dist\nargs.dist_backend = 'nccl'\ndist.init_process_group(backend=args.dist_backend)\n",
            (
                "import torch.distributed as dist\n"
                "\n"
                + guard_text() +
                "\n"
                "args.dist_backend = 'hccl'\n"
                "dist.init_process_group(backend=args.dist_backend)\n"
            ),
        ),
        Example("import torch.distributed as dist\ndist.init_process_group('gloo')\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.compared: list[list[cst.BaseExpression]] = []
        self.sources: list[tuple[cst.BaseExpression, str]] = []
        self.named: list[tuple[cst.BaseExpression, str]] = []
        self.literals: list[cst.SimpleString] = []
        self.fixed: set[cst.CSTNode] = set()
        self.accounted: set[cst.CSTNode] = set()  # literals reported on their own (accelerate's default)
        #: ``args.dist_backend = 'nccl'``: attribute (as written) -> values assigned to it
        self.attribute_values: dict[str, list[cst.BaseExpression]] = {}
        #: ``comm_backend: str = "nccl"`` in a class body (a dataclass field, a class
        #: attribute): field name -> values, read through ``cfg.comm_backend``
        self.class_fields: dict[str, list[cst.BaseExpression]] = {}
        self.name_values: list[tuple[cst.Name, cst.BaseExpression]] = []

    # -- collection during the pass ---------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in BACKEND_PARAMS:
            keyword, position = BACKEND_PARAMS[qualified]
            arg = call_arg(node, keyword, position)
            if arg is not None:
                self._source(arg.value, f"passed as the backend of `{qualified}`")
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
            self._argparse(node)
        if self._other_system(node):
            return  # ray.util.collective's, vLLM's own backend names: reported, never rewritten
        if (qualified or "").rsplit(".", 1)[-1] == "InitProcessGroupKwargs" and (qualified or "").startswith("accelerate"):
            self._accelerate_kwargs(node)
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in BACKEND_KEYWORDS:
                self._source(arg.value, f"passed as `{arg.keyword.value}=`, a keyword that names a process-group backend")

    def _accelerate_kwargs(self, node: cst.Call) -> None:
        """accelerate's ``InitProcessGroupKwargs(backend="nccl")``: "nccl" is the field's
        default, which ``to_kwargs()`` drops, so accelerate chooses the backend itself (hccl
        on Ascend). Written as "hccl" it is passed on, and a single-process run (no
        ``LOCAL_RANK``: the default ``accelerate launch`` of one device) then asks for the
        world size of a process group never started (finetrainers' CogVideoX trainers,
        held-out round 21). Left as it is and said; another value is reported."""
        arg = call_arg(node, "backend", 0)
        if arg is None or (value := string_value(arg.value)) is None:
            if arg is not None:
                self.report(arg.value, "this value goes to accelerate's `InitProcessGroupKwargs(backend=...)`: \"nccl\" "
                            "there is its default, which accelerate replaces with its own choice (hccl on Ascend); "
                            "left unchanged", "make sure it is \"nccl\" or None on Ascend, not \"hccl\" (a single-process "
                            "run would then fail) and not another backend")
            return
        if value.strip().lower() == "nccl":
            self.accounted.add(arg.value)
            self.report(arg.value, "accelerate's `InitProcessGroupKwargs(backend=\"nccl\")` is its default, which "
                        "accelerate replaces with its own choice (hccl on Ascend); left unchanged",
                        "nothing to do on Ascend; do not write \"hccl\" here: a single-process run would then ask for a "
                        "process group that was never started")

    def _argparse(self, node: cst.Call) -> None:
        flags = [string_value(a.value) for a in node.args if a.keyword is None and not a.star]
        dest = call_arg(node, "dest")
        dest_name = string_value(dest.value) if dest is not None else None

        def names_backend(flag: str | None) -> bool:
            # `--dist_backend`, or a dotted group's `--ddp.dist_backend` (CosyVoice, round 20)
            return flag is not None and flag.lstrip("-").rsplit(".", 1)[-1] in ARGPARSE_BACKEND_OPTIONS

        if not any(map(names_backend, flags)) and dest_name not in ARGPARSE_BACKEND_OPTIONS:
            return
        option = next((f for f in flags if names_backend(f)), None) or next((f for f in flags if f is not None), "")
        default = call_arg(node, "default")
        if default is not None:
            self._source(default.value, f"the default of the argparse option `{option}`")
        choices = call_arg(node, "choices")
        if choices is not None and isinstance(choices.value, (cst.List, cst.Tuple, cst.Set)):
            for element in choices.value.elements:
                self._source(element.value, f"a choice of the argparse option `{option}`")

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assigned(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value)

    def _assigned(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute):
            text = self.ctx.module.code_for_node(target)
            self.attribute_values.setdefault(text, []).append(value)
            if target.attr.value in BACKEND_KEYWORDS and other_systems_owner(text.split(".")[:-1]) is None:
                # `args.dist_backend = 'nccl'` where the process group is started in another file
                # (not `cfg.rollout.checkpoint_engine.backend`: verl's engine name)
                self.named.append((value, f"assigned to `{text}`, an attribute named for a process-group backend"))
        if isinstance(target, cst.Name):
            self.name_values.append((target, value))  # sorted into class fields in leave_file
        if isinstance(target, cst.Attribute):
            pass
        elif isinstance(target, cst.Name) and target.value.lower() in BACKEND_KEYWORDS:
            # `dist_backend = "nccl"` in a config module or a class body, `backend: str = "nccl"`
            self.named.append((value, f"assigned to `{target.value}`, a name for a process-group backend"))
        elif isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
            key = string_value(target.slice[0].slice.value)
            if key in BACKEND_KEYWORDS:  # cfg["dist_backend"] = "nccl"
                self.named.append((value, f"stored under the key {key!r}, which names a process-group backend"))

    def _in_class_body(self, target: cst.CSTNode) -> bool:
        """Whether the statement assigning ``target`` sits directly in a class body."""
        for ancestor in self.ctx.ancestors(target):
            if isinstance(ancestor, cst.IndentedBlock):
                return isinstance(self.ctx.parent(ancestor), cst.ClassDef)
            if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
                return False
        return False

    def _other_system(self, call: cst.Call) -> bool:
        """A call of another system whose ``backend`` is its own name (ray.util.collective's
        ``init_collective_group(backend="nccl")``, vLLM's engine configs), or a serialisation
        (``json.dumps({"backend": "nccl"})`` for another program's command line)."""
        qualified = self.qualified_name(call.func) or ""
        if qualified.split(".")[0] in OTHER_SYSTEMS or qualified in _SERIALISERS:
            return True
        # verl's CheckpointEngineConfig(backend="nccl"): that engine's own name
        return last_name(call.func) in _OTHER_COLLECTIVES or other_systems_owner([last_name(call.func)]) is not None

    def visit_DictElement(self, node: cst.DictElement) -> None:
        holder = next((a for a in self.ctx.ancestors(node) if isinstance(a, cst.Call)
                       or isinstance(a, cst.BaseStatement)), None)
        if isinstance(holder, cst.Call) and self._other_system(holder):
            return
        if string_value(node.key) in BACKEND_KEYWORDS:
            self._source(node.value, f"the value of a {string_value(node.key)!r} dict entry")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(c.comparator for c in node.comparisons)]
        if not any(isinstance(o, cst.Call) and self.qualified_name(o.func) in GET_BACKEND for o in operands):
            self.compared.append(operands)
            return
        why = "compared with `dist.get_backend()`"
        for operand in operands:
            if isinstance(operand, (cst.Tuple, cst.List, cst.Set)):
                for element in operand.elements:
                    self._source(element.value, why)
            elif isinstance(operand, (cst.SimpleString, cst.Name)):
                self._source(operand, why)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.qualified_name(node) in BACKEND_NCCL:
            backend = self.ctx.target.backend
            self.replace(node, string_literal(backend, self.ctx.quote), f"`Backend.NCCL` -> `\"{backend}\"`",
                         reason="`torch.distributed.Backend.NCCL` names the NCCL backend")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and mentions_nccl(value):
            self.literals.append(node)

    # -- decisions once the whole file has been seen ----------------------------------

    def leave_file(self) -> None:
        for target, value in self.name_values:  # parents are known once the file is seen
            if self._in_class_body(target):
                self.class_fields.setdefault(target.value, []).append(value)
        # where the backend is used first (the better evidence), then what is only named so
        for source, why in [*self.sources, *self.named]:
            self._resolve(source, 0, why)
        for operands in self.compared:
            # `backend = "nccl" if torch.cuda.is_available() else "gloo"` (rewritten), then
            # `if backend == "nccl" and ...:` must test the same value (mistral-finetune's tests)
            holder = next((o for o in operands if isinstance(o, (cst.Name, cst.Attribute)) and self._holds_fixed(o)), None)
            torch_holder = None if holder is not None else next(
                (o for o in operands if isinstance(o, cst.Name) and self._holds_torch_backend(o)), None)
            if holder is None and torch_holder is None:
                continue
            text = self.ctx.module.code_for_node(holder or torch_holder)
            why = (f"compared with `{text}`, which holds the rewritten backend" if holder is not None else
                   f"compared with `{text}`, which holds `dist.get_backend()`: torch's own answer, 'hccl' on Ascend")
            for operand in operands:
                if isinstance(operand, cst.SimpleString):
                    self._fix(operand, why)
        for literal in self.literals:
            if literal not in self.fixed and literal not in self.accounted and not self._beside_hccl(literal):
                self.report(literal, f"{literal.value} names the NCCL backend, which Ascend does not have", SUGGESTION)

    def _holds_fixed(self, node: cst.Name | cst.Attribute) -> bool:
        """Every value assigned to ``node`` in this file that names nccl was rewritten, and one was."""
        if isinstance(node, cst.Name):
            values = list(self.ctx.plain_values(node)) if self.qualified_name(node) is None else []
        else:
            values = list(self.attribute_values.get(self.ctx.module.code_for_node(node), ()))
        literals = [v for value in values for v in _literals(value)]
        named = [v for v in literals if mentions_nccl(string_value(v) or "")]
        return bool(named) and all(v in self.fixed for v in named)

    def _holds_torch_backend(self, node: cst.Name) -> bool:
        """A value assigned to ``node`` in this file is (or falls back to) ``dist.get_backend()``
        (OLMo-core's ``backend = backend or dist.get_backend()`` before ``"nccl" in backend``):
        the name holds torch's process-group backend, which is "hccl" on Ascend."""
        if self.qualified_name(node) is not None:
            return False
        for value in self.ctx.plain_values(node):
            stack = [value]
            while stack:
                part = stack.pop()
                if isinstance(part, cst.Call) and self.qualified_name(part.func) in GET_BACKEND:
                    return True
                if isinstance(part, cst.BooleanOperation):
                    stack += [part.left, part.right]
                elif isinstance(part, cst.IfExp):
                    stack += [part.body, part.orelse]
        return False

    def _beside_hccl(self, literal: cst.SimpleString) -> bool:
        """A table that already names the NPU's backend (``{"cuda": "nccl", "npu": "hccl"}``,
        ``("nccl", "hccl")``): NPU-aware code, nothing to report."""
        parent = self.ctx.parent(literal)
        if not isinstance(parent, (cst.DictElement, cst.Element)):
            return False
        container = self.ctx.parent(parent)
        values = []
        for element in getattr(container, "elements", ()):
            for part in (getattr(element, "key", None), getattr(element, "value", None)):
                value = string_value(part) if part is not None else None
                if value is not None:
                    values.append(value.lower())
        return "hccl" in values or "npu" in values

    def _source(self, node: cst.CSTNode, why: str) -> None:
        self.sources.append((node, why))

    def _resolve(self, node: cst.CSTNode, depth: int, why: str) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(node, cst.SimpleString):
            self._fix(node, why)
        elif isinstance(node, cst.IfExp):
            self._resolve(node.body, depth + 1, why)
            self._resolve(node.orelse, depth + 1, why)
        elif isinstance(node, cst.BooleanOperation):
            self._resolve(node.left, depth + 1, why)
            self._resolve(node.right, depth + 1, why)
        elif isinstance(node, cst.Call) and self.qualified_name(node.func) in ENV_DEFAULT:
            default = call_arg(node, "default", 1)
            if default is not None:
                self._resolve(default.value, depth + 1, f"the default of an environment lookup that is {why}")
        elif isinstance(node, cst.Name) and self.qualified_name(node) is None:
            for value in self.ctx.plain_values(node):
                self._resolve(value, depth + 1, f"assigned to `{node.value}`, which is {why}")
        elif isinstance(node, cst.Attribute) and self.qualified_name(node) is None:
            # `args.dist_backend = 'nccl'` ... `init_process_group(backend=args.dist_backend)`
            text = self.ctx.module.code_for_node(node)
            for value in self.attribute_values.get(text, ()):
                self._resolve(value, depth + 1, f"assigned to `{text}`, which is {why}")
            if text not in self.attribute_values:
                # `cfg.comm_backend` of a dataclass whose field `comm_backend: str = "nccl"` is here
                for value in self.class_fields.get(node.attr.value, ()):
                    self._resolve(value, depth + 1, f"the class field `{node.attr.value}`, read as `{text}`, which is {why}")

    def _fix(self, node: cst.SimpleString, why: str) -> None:
        value = string_value(node)
        new = self.ctx.target.backend_string(value) if value is not None else None
        if new is None or node in self.fixed:
            return
        self.fixed.add(node)
        # A file that imports no torch (a Python config of plain dicts, mmcv's `dist_params =
        # dict(backend='nccl')`) only holds the name; the code that starts the process group
        # imports torch_npu (NPU100 adds it there). An import here would be a config key too.
        # So does a config that imports torch for a dtype but starts no process group itself
        # (xtuner's `dist_cfg=dict(backend="hccl")` beside `torch_dtype=torch.bfloat16`).
        self.replace(node, lambda n: with_string_value(n, new), f"backend {value!r} -> {new!r}", reason=why,
                     needs_torch_npu=self.ctx.imports.imports_module("torch")
                     and _STARTS_GROUPS.search(self.ctx.text) is not None)


def _literals(node: cst.CSTNode) -> list[cst.SimpleString]:
    """The string literals a value may be: ``"nccl" if c else "gloo"``, ``x or "nccl"``."""
    if isinstance(node, cst.SimpleString):
        return [node]
    if isinstance(node, cst.IfExp):
        return [*_literals(node.body), *_literals(node.orelse)]
    if isinstance(node, cst.BooleanOperation):
        return [*_literals(node.left), *_literals(node.right)]
    return []
