"""NPU951: Ray placement-group bundles ``{"GPU": n}`` become ``{"NPU": n}``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value, with_string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster import _ray
from npu_migrate.rules.cluster.python._common import (
    compares_resource_name,
    in_gpu_branch,
    left_gpu_request,
    left_request_text,
)

#: the functions that take a list of bundles first (``bundles=``)
PLACEMENT_GROUP = frozenset({"ray.util.placement_group", "ray.util.placement_group.placement_group"})
#: calls that read the cluster's resource totals, keyed by resource name
RESOURCE_TOTALS = frozenset({"ray.cluster_resources", "ray.available_resources"})
_WHY = 'Ray schedules Ascend devices under the resource name "NPU" (ray 2.60.0: ray/_private/accelerators/npu.py)'


def gpu_keys(expr: cst.BaseExpression, name: str = "GPU") -> list[cst.SimpleString]:
    """The ``"GPU"`` keys (or ``name``'s) of the dict literals that make up a bundle list:
    ``[{...}, ...]``, ``[{...}] * n``, ``[{...} for _ in range(n)]``."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [k for e in expr.elements for k in gpu_keys(e.value, name)]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return gpu_keys(expr.left, name) + gpu_keys(expr.right, name)
    if isinstance(expr, cst.ListComp):
        return gpu_keys(expr.elt, name)
    if isinstance(expr, cst.Dict):
        return [e.key for e in expr.elements
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and string_value(e.key) == name]
    return []


def names_npu_resource(module: cst.Module) -> bool:
    """The module names Ray's Ascend resource itself: ``return "NPU"``, ``x == "NPU"``,
    ``key = "NPU"`` (AReaL's ``ray_resource_type()`` returns ``"NPU"`` on Ascend and its bundles
    are ``{device: n}``): it picks the resource per platform. Dict keys and subscripts do not
    count: they are what this rule itself writes, and a second run must report the same."""

    def npu(node: cst.BaseExpression | None) -> bool:
        return isinstance(node, cst.SimpleString) and string_value(node) == _ray.RESOURCE

    class _Find(cst.CSTVisitor):
        found = False

        def visit_Return(self, node: cst.Return) -> None:
            self.found = self.found or npu(node.value)

        def visit_Comparison(self, node: cst.Comparison) -> None:
            self.found = self.found or npu(node.left) or any(npu(c.comparator) for c in node.comparisons)

        def visit_Assign(self, node: cst.Assign) -> None:
            self.found = self.found or npu(node.value)

    finder = _Find()
    module.visit(finder)
    return finder.found


def written(expr: cst.BaseExpression) -> bool:
    """Whether the bundle list is written out here as dict literals (whatever their keys)."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(written(e.value) for e in expr.elements)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return written(expr.left) or written(expr.right)
    if isinstance(expr, cst.ListComp):
        return written(expr.elt)
    return isinstance(expr, cst.Dict)


def _gpu_dict_keys(node: cst.CSTNode) -> list[cst.SimpleString]:
    """Every ``"GPU"`` key of a dict literal anywhere in ``node``."""
    found: list[cst.SimpleString] = []

    class Keys(cst.CSTVisitor):
        def visit_DictElement(self, element: cst.DictElement) -> None:
            if isinstance(element.key, cst.SimpleString) and string_value(element.key) == "GPU":
                found.append(element.key)

    node.visit(Keys())
    return found


class RayGpuBundles(Rule):
    id = "NPU951"
    name = "ray-gpu-bundles"
    impact = "blocking"
    summary = 'Rewrite the `"GPU"` key of Ray placement-group bundles (and of `ray.cluster_resources()[...]`) to `"NPU"`'
    triggers = (("ray", "GPU"),)
    whole_file = True
    rationale = """
A placement group reserves bundles of resources (`placement_group([{"GPU": 1,
"CPU": 4}] * 8)`); on an Ascend node there is no `"GPU"` resource, so the group
never becomes ready and `ray.get(pg.ready())` waits forever. Ray names Ascend
devices `"NPU"` (ray 2.60.0, `ray/_private/accelerators/npu.py`), and a bundle asks
for them as `{"NPU": 1}`. Likewise `ray.cluster_resources()["GPU"]` /
`ray.available_resources().get("GPU", 0)` count GPUs: `KeyError` or 0 on Ascend.

Rewritten: `"GPU"` keys of the dict literals written in the bundle argument of
`ray.util.placement_group(...)` (a list, `[{...}] * n`, a list comprehension), or in
the one assignment of a local variable passed there that nothing else reads but
`len()` or an f-string's `{name}` (a log line); `"GPU"` read from `ray.cluster_resources()` / `ray.available_resources()`
(subscript or `.get`), directly or through a name assigned once from that call
(`resources = ray.cluster_resources()`, then `resources.get("GPU", 0)`). A bundle
list kept elsewhere is reported with its replacement; so is a placement group whose
bundles are not written in the file at all (`placement_group(plan["bundles"])`, a
parameter, a call's result): the finding sits on the call, where the group is made.
`"GPU"` read from the bundles of a placement group itself (`bundle.get("GPU", 0) for
bundle in pg.bundle_specs`, directly or through a name assigned once from it: ray
2.60.0's `PlacementGroup.bundle_specs` returns the group's bundles) is rewritten with
them. The "built elsewhere" finding is left out where the module tests a value against
`"GPU"` (`platform.ray_device_key == "GPU"`):
such code builds its bundles from the platform's resource name (ROLL's
`{current_platform.ray_device_key: n, "CPU": m}`). Keys in the GPU branch of such a
test (`if key == "GPU": ... else: ...`) are left alone, as NPU950 does. Code that writes
Ray's `"NPU"` itself picks the resource per platform (AReaL: `if is_npu_available:
bundles = [{"NPU": n, ...}] else: bundles = [{"GPU": n, ...}]`, or a helper returning
`"NPU"` on Ascend): a bundle list with an `"NPU"` assignment, and "built elsewhere"
in a module that returns, compares or assigns the string `"NPU"` (not as a dict key or
subscript, which this rule writes itself), are not reported.
A total read beside a Ray request the file keeps (`num_gpus=` with a computed value,
which NPU950 reports) stays and is reported too: the count and the request must name the
same resource, and only one of them would have changed.
"""
    examples = (
        Example(
            'from ray.util.placement_group import placement_group\n\npg = placement_group([{"GPU": 1, "CPU": 4}] * 8)\n',
            'from ray.util.placement_group import placement_group\n\npg = placement_group([{"NPU": 1, "CPU": 4}] * 8)\n',
        ),
        Example(
            'import ray\n\nn = int(ray.cluster_resources()["GPU"])\n',
            'import ray\n\nn = int(ray.cluster_resources()["NPU"])\n',
        ),
        Example('import ray\n\nbundles = [{"GPU": 1}]\nprint(bundles)\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[cst.SimpleString] = set()
        self._chooses: bool | None = None
        self._spec_reads: list[tuple[cst.CSTNode, cst.BaseExpression, cst.Name]] = []
        self._pending: list[cst.BaseExpression] = []
        self._reported_keys: set[int] = set()

    def leave_file(self) -> None:
        for value in self._pending:
            self._bundles(value)
        for read, key, name in self._spec_reads:  # the loop's binding is seen only now
            if isinstance(key, cst.SimpleString) and string_value(key) == "GPU" and self._from_bundle_specs(name) \
                    and not in_gpu_branch(self.ctx, read):
                self.replace(key, lambda k: with_string_value(k, _ray.RESOURCE),
                             '`"GPU"` read from a bundle of `PlacementGroup.bundle_specs` -> `"NPU"`',
                             needs_torch_npu=False, reason=f"a resource name read from a placement group's own "
                             f"bundles (ray 2.60.0: ray/util/placement_group.py, `bundle_specs`); {_WHY}")

    def _from_bundle_specs(self, name: cst.Name) -> bool:
        """``name`` is the loop variable of a ``for`` or comprehension over a placement
        group's ``bundle_specs`` (directly, or through a name assigned once from it):
        SkyRL's ``bundles = pg.bundle_specs`` then ``bundle.get("GPU", 0) for bundle in bundles``."""
        found = self.ctx.assignments(name, name.value)
        if not found or len(found) != 1:
            return False
        bound = getattr(next(iter(found)), "node", None)
        loop = self.ctx.parent(bound) if isinstance(bound, cst.Name) else None
        if not isinstance(loop, (cst.For, cst.CompFor)) or loop.target is not bound:
            return False
        source = loop.iter
        if isinstance(source, cst.Name):
            held = self.ctx.assignments(source, source.value)
            if not held or len(held) != 1:
                return False
            source = self._assigned_value(getattr(next(iter(held)), "node", None))
        return isinstance(source, cst.Attribute) and source.attr.value == "bundle_specs"

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in PLACEMENT_GROUP:
            argument = call_arg(node, "bundles", 0)
            if argument is not None:
                self._pending.append(argument.value)  # decided once every read of a variable has been seen
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and node.args:
            source = self._totals(node.func.value)
            if source is not None and not in_gpu_branch(self.ctx, node):
                self._key(node.args[0].value, source)
            elif source is None and isinstance(node.func.value, cst.Name):
                self._spec_reads.append((node, node.args[0].value, node.func.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            source = self._totals(node.value)
            if source is not None and not in_gpu_branch(self.ctx, node):
                self._key(node.slice[0].slice.value, source)
            elif source is None and isinstance(node.value, cst.Name):
                self._spec_reads.append((node, node.slice[0].slice.value, node.value))

    def _totals(self, value: cst.BaseExpression) -> str | None:
        """``ray.cluster_resources`` for ``ray.cluster_resources()`` itself or for a name
        assigned once in its scope, from that call (``resources = ray.cluster_resources()``)."""
        if isinstance(value, cst.Name):
            found = self.ctx.assignments(value, value.value)
            if not found or len(found) != 1:
                return None
            value = self._assigned_value(getattr(next(iter(found)), "node", None))  # builtins have no node
        if isinstance(value, cst.Call):
            qualified = self.qualified_name(value.func)
            if qualified in RESOURCE_TOTALS:
                return qualified
        return None

    def _key(self, key: cst.BaseExpression, source: str) -> None:
        if isinstance(key, cst.SimpleString) and string_value(key) == "GPU":
            request = left_gpu_request(self.ctx)
            if request is not None:
                self.report(key, f'`{source}()["GPU"]` counts the resource that {left_request_text(self.ctx, request)} '
                            "still asks for: that request is computed and left "
                            "(NPU950, NPU953), and the count must name the same resource; left unchanged",
                            'write "NPU" here and `resources={"NPU": ...}` there together')
                return
            self.replace(key, lambda k: with_string_value(k, _ray.RESOURCE), f'`{source}()["GPU"]` -> `"NPU"`',
                         needs_torch_npu=False, reason=f"a resource name read from `{source}()`; {_WHY}")

    def _bundles(self, value: cst.BaseExpression) -> None:
        keys = gpu_keys(value)
        if keys:
            self._rewrite(keys, "a placement-group bundle")
            return
        if written(value):
            return  # dict literals without "GPU": nothing to do
        found = self.ctx.assignments(value, value.value) if isinstance(value, cst.Name) else None
        if not found or not any(written(v) for v in map(self._assigned_value, (getattr(a, "node", None) for a in found)) if v is not None):
            self._elsewhere(value)
            return
        source = self._single_literal(found, value)
        if source is None:
            bound = [getattr(a, "node", None) for a in found]
            values = [v for v in map(self._assigned_value, bound) if v is not None]
            literal = next((v for v in values if gpu_keys(v)), None)
            if any(gpu_keys(v, _ray.RESOURCE) for v in values):
                return  # `if is_npu_available: b = [{"NPU": n}] else: b = [{"GPU": n}]` (AReaL): picked per platform
            if literal is not None:
                self.report(value, f"the bundles in `{value.value}` ask Ray for `\"GPU\"`, and `{value.value}` is also "
                            "assigned or read elsewhere", f'write `"NPU"` for `"GPU"` in its bundles; {_WHY}')
            return
        self._rewrite(gpu_keys(source), f"a placement-group bundle (through `{value.value}`)")

    def _elsewhere(self, value: cst.BaseExpression) -> None:
        if self._picks_resource_name():
            return  # bundles built from the platform's resource name (ROLL's `{platform.ray_device_key: n}`)
        self.report(value, "the bundles of this placement group are built elsewhere: a `\"GPU\"` entry in them is "
                    "never satisfied on Ascend", f'ask for `{{"NPU": n}}` where the bundles are written; {_WHY}')
        # the `"GPU"` entries of the function's own dicts are most likely those bundles (verl's
        # `pg_scheme = [[{"CPU": n, "GPU": 1} if self.use_gpu else {...} ...]]`, held-out round
        # 20): each gets a line of its own, where it is written
        function = next((a for a in self.ctx.ancestors(value) if isinstance(a, cst.FunctionDef)), None)
        for key in _gpu_dict_keys(function) if function is not None else ():
            if id(key) in self._reported_keys or key in self._done:
                continue
            self._reported_keys.add(id(key))
            self.report(key, 'a `"GPU"` entry in a dict of the function that makes this placement group: as one of '
                        "its bundles it is never satisfied on Ascend", f'ask for `"NPU"` there; {_WHY}')

    def _assigned_value(self, bound) -> cst.BaseExpression | None:
        if not isinstance(bound, cst.Name):
            return None
        target = self.ctx.parent(bound)
        statement = self.ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            return statement.value
        return None

    def _single_literal(self, found, use: cst.Name) -> cst.BaseExpression | None:
        """The value of the one assignment of ``use``'s name, if every other read of it is
        ``len(name)``, another placement group's bundles, or an f-string's ``{name}``."""
        if len(found) != 1:
            return None
        (assignment,) = found
        value = self._assigned_value(assignment.node)
        if value is None or not gpu_keys(value):
            return None
        for access in assignment.references:
            node = access.node
            if node is use:
                continue
            parent = self.ctx.parent(node)
            if isinstance(parent, cst.FormattedStringExpression) and parent.expression is node:
                continue  # shown in a message (open-instruct's `logger.info(f"Requesting bundles: {bundles}")`)
            owner = self.ctx.parent(parent) if isinstance(parent, cst.Arg) else None
            if not (isinstance(owner, cst.Call) and (
                (isinstance(owner.func, cst.Name) and owner.func.value == "len")
                or self.qualified_name(owner.func) in PLACEMENT_GROUP
            )):
                return None
        return value

    def _picks_resource_name(self) -> bool:
        if self._chooses is None:
            self._chooses = compares_resource_name(self.ctx.module) or names_npu_resource(self.ctx.module)
        return self._chooses

    def _rewrite(self, keys: list[cst.SimpleString], where: str) -> None:
        request = left_gpu_request(self.ctx)
        for key in keys:
            if key in self._done or in_gpu_branch(self.ctx, key):
                continue
            self._done.add(key)
            if request is not None:
                self.report(key, f"{where} asks Ray for `\"GPU\"`, as {left_request_text(self.ctx, request)} "
                                 "does: that request is computed and left (NPU950, NPU953), and the bundles must name the "
                                 "same resource or the actors can never be placed; left unchanged",
                            'write "NPU" here and `resources={"NPU": ...}` there together')
                continue
            self.replace(key, lambda k: with_string_value(k, _ray.RESOURCE), '`{"GPU": n}` bundle -> `{"NPU": n}`',
                         needs_torch_npu=False, reason=f"a resource name in {where}; {_WHY}")
