"""NPU952: ``ray.get_gpu_ids()`` becomes the runtime context's ``"NPU"`` accelerator ids."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster import _ray
from npu_migrate.rules.cluster.python._common import left_gpu_request, left_request_text

#: builtins whose result does not depend on whether the ids are ``int`` or ``str``
#: (``len(ids)``, ``str(ids[0])``, ``int(ids[0])``)
_TYPE_FREE = frozenset({"len", "str", "int", "bool"})
_WHY = ('Ray names Ascend devices "NPU" (ray 2.60.0: ray/_private/accelerators/npu.py); get_accelerator_ids() returns '
        "Dict[str, List[str]] (ray/runtime_context.py)")


class RayGetGpuIds(Rule):
    id = "NPU952"
    name = "ray-get-gpu-ids"
    impact = "blocking"
    summary = ('Rewrite `ray.get_gpu_ids()` to `ray.get_runtime_context().get_accelerator_ids()["NPU"]` '
               "where the use does not depend on the ids' type")
    triggers = ("get_gpu_ids",)
    rationale = """
`ray.get_gpu_ids()` lists the GPUs Ray assigned to the task or actor: empty on an
Ascend node, so `ray.get_gpu_ids()[0]` raises `IndexError`. The NPUs assigned are
`ray.get_runtime_context().get_accelerator_ids()["NPU"]` (ray 2.60.0,
`ray/runtime_context.py`, keyed by `NPUAcceleratorManager.get_resource_name()`).

The types differ: `get_gpu_ids()` returns `Union[List[int], List[str]]` (ints unless
`CUDA_VISIBLE_DEVICES` was set when the worker started, `ray/_private/worker.py`),
`get_accelerator_ids()` always strings. The call is rewritten only where that
cannot matter: `len(...)`/`bool(...)` of the list, `str(...)`/`int(...)` of one id, `map(str, ...)`/`map(int, ...)`, and an f-string field. Anywhere else it is
reported with the replacement (`[int(i) for i in ...]` where integers are needed).
"""
    examples = (
        Example(
            'import ray\n\ndevice = f"cuda:{ray.get_gpu_ids()[0]}"\n',
            'import ray\n\ndevice = f"cuda:{ray.get_runtime_context().get_accelerator_ids()[\'NPU\'][0]}"\n',
        ),
        Example(
            "import ray\n\nn = len(ray.get_gpu_ids())\n",
            'import ray\n\nn = len(ray.get_runtime_context().get_accelerator_ids()["NPU"])\n',
        ),
        Example("import ray\n\ngpu = ray.get_gpu_ids()[0]  # reported\n"),
        Example("def get_gpu_ids():\n    return [0]\n\nget_gpu_ids()\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if node.args or self.qualified_name(node.func) != "ray.get_gpu_ids":
            return
        module = self._ray_name()
        quote = self.ctx.quote
        inner = "'" if quote == '"' else '"'
        in_fstring = any(isinstance(a, cst.FormattedStringExpression) for a in self.ctx.ancestors(node))
        key_quote = inner if in_fstring and not self._fstring_allows(node, quote) else quote
        text = f"{module or 'ray'}.get_runtime_context().get_accelerator_ids()[{key_quote}NPU{key_quote}]"
        request = left_gpu_request(self.ctx)
        if request is not None:
            self.report(node, f"`ray.get_gpu_ids()` reads the GPUs Ray assigns for {left_request_text(self.ctx, request)}: "
                              "that request is computed and left (NPU950, NPU953), so these actors still hold GPUs; left unchanged",
                        f"move the request and this read to `\"NPU\"` together: `resources={{\"NPU\": ...}}` there, "
                        f"`{text}` here; {_WHY}")
            return
        if module is None or not self._type_free(node):
            self.report(node, "`ray.get_gpu_ids()` is empty on Ascend (Ray assigns `\"NPU\"` resources, not GPUs)",
                        f"use `{text}` (a list of str; `[int(i) for i in {text}]` where integers are needed); {_WHY}")
            return
        self.replace(node, cst.parse_expression(text), f"`ray.get_gpu_ids()` -> `{text}`", needs_torch_npu=False,
                     reason=f"used where int and str ids give the same result; {_WHY}")

    def _ray_name(self) -> str | None:
        """The local name the file binds to the module ``ray``."""
        return next((local for local, qualified in self.ctx.imports.bindings.items() if qualified == "ray"), None)

    def _fstring_allows(self, node: cst.CSTNode, quote: str) -> bool:
        """Python 3.12 lets an f-string field reuse its own quote; older ones do not, so
        inside an f-string written with ``quote`` the key takes the other one."""
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.FormattedString):
                return quote not in ancestor.start
        return True

    def _type_free(self, node: cst.Call) -> bool:
        """The list (or one id of it) is used where int and str behave the same."""
        current: cst.CSTNode = node
        parent = self.ctx.parent(current)
        if isinstance(parent, cst.Subscript) and parent.value is current:
            current, parent = parent, self.ctx.parent(parent)
        if isinstance(parent, cst.FormattedStringExpression):
            return True
        if isinstance(parent, cst.Arg):
            call = self.ctx.parent(parent)
            if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name) or parent.keyword is not None:
                return False
            name = call.func.value
            if name in _TYPE_FREE and len(call.args) == 1:
                # len()/bool() of the list; str()/int() of one id (str() of the list shows the quotes)
                return (current is node) == (name in ("len", "bool"))
            if name == "map" and len(call.args) == 2 and call.args[1] is parent and current is node:
                first = call.args[0].value
                return isinstance(first, cst.Name) and first.value in ("str", "int")
        return False
