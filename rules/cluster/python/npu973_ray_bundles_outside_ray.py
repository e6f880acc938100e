"""NPU973: ``{"GPU": n, "CPU": m}`` bundles and ``"GPU"`` totals handled in a module that does not import ray."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster import _ray

#: names that say "a Ray placement-group bundle" (learner_pg_bundles, placement_group_specs, pg_resources)
BUNDLE_NAME = re.compile(r"bundle|placement|(?:^|_)pg(?:_|$)", re.IGNORECASE)
#: names that say "the cluster's resource totals" (Ray's ray.cluster_resources / ray.available_resources)
TOTALS_NAME = re.compile(r"(?:cluster|available)_resources", re.IGNORECASE)
_ROUTE = (f'write "NPU" for "GPU" ({_ray.SOURCE}) where this dict is built, once you have checked that it is a Ray '
          "bundle or resource total: this module does not import ray, so it is reported, not rewritten")
#: what a dict may hold around the value: list/tuple/list-comprehension/``[...] * n``
_CONTAINERS = (cst.List, cst.Tuple, cst.ListComp, cst.Element, cst.BinaryOperation, cst.SetComp, cst.GeneratorExp)


def _keys(node: cst.Dict) -> dict[str, cst.SimpleString]:
    return {string_value(e.key): e.key for e in node.elements
            if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)}


def _name(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return string_value(node.slice[0].slice.value)
    return None


class RayBundlesOutsideRay(Rule):
    id = "NPU973"
    name = "ray-bundles-outside-ray"
    impact = "blocking"
    fixable = False
    summary = ('Report `{"GPU": n, "CPU": m}` bundles and `"GPU"` reads of bundles or cluster totals in modules that '
               "do not import ray (resource plans built for Ray elsewhere)")
    triggers = ("GPU",)
    rationale = f"""
RLHF frameworks plan their Ray placement groups in helper modules that never import
ray (open-instruct's `grpo_fast_resource_plan.py` builds
`learner_pg_bundles = [{{"GPU": n, "CPU": 10 * n}} ...]`, sums `bundle["GPU"]` and
reads `cluster_resources.get("GPU", 0.0)`); the placement group is made in another
file. On Ascend Ray has no `"GPU"` resource ({_ray.SOURCE}): the bundles never fit
and the totals are 0. NPU951 rewrites what a file that imports ray passes to
`placement_group(...)` (and reports such a call whose bundles are built elsewhere);
this rule reports the other end, conservatively, only where the code says it is a
Ray resource dict:

- a dict literal with both a `"GPU"` and a `"CPU"` key (Ray's resource names are
  these upper-case strings, `ray/_common/ray_option_utils.py`) that is assigned to,
  returned as, or stored under a name saying bundle/placement/pg (`bundles`,
  `learner_pg_bundles`, a function `make_placement_group_specs`), alone or in a list,
  a list comprehension or `[...] * n`;
- `X["GPU"]` / `X.get("GPU", ...)` where `X` is named like a bundle (`bundle`,
  `pg_bundle`) or like Ray's totals (`cluster_resources`, `available_resources`).

Reported, never rewritten: without an import of ray nothing proves the dict reaches
Ray (Dask, for one, takes user-defined `resources={{"GPU": 1}}` labels), and the
`"GPU"` keys written and read in such a module must change together. Files that
import ray are left to NPU951.
"""
    examples = (
        Example('def plan(n):\n    bundles = [{"GPU": 1, "CPU": 8} for _ in range(n)]  # reported\n    return bundles\n'),
        Example('def shortfall(cluster_resources):\n    return cluster_resources.get("GPU", 0.0)  # reported\n'),
        Example('def worker(client):\n    return client.submit(f, resources={"GPU": 1})\n'),
        Example('limits = {"GPU": 1, "CPU": 8}\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._off = any(v == "ray" or v.startswith("ray.") for v in ctx.imports.bindings.values())

    def visit_Dict(self, node: cst.Dict) -> None:
        if self._off:
            return
        keys = _keys(node)
        if "GPU" not in keys or "CPU" not in keys:
            return
        owner = self._owner(node)
        if owner is not None and BUNDLE_NAME.search(owner):
            self.report(keys["GPU"], f'`"GPU"` in a Ray-style resource bundle (`{owner}`): Ascend nodes have no "GPU" '
                        "resource, so the bundle never fits", _ROUTE)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            self._read(node.value, node.slice[0].slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and node.args:
            self._read(node.func.value, node.args[0].value)

    def _read(self, owner: cst.BaseExpression, key: cst.BaseExpression) -> None:
        if self._off or not (isinstance(key, cst.SimpleString) and string_value(key) == "GPU"):
            return
        name = _name(owner)
        if name is None or not (BUNDLE_NAME.search(name) or TOTALS_NAME.search(name)):
            return
        what = "Ray's resource totals" if TOTALS_NAME.search(name) else "a Ray-style resource bundle"
        self.report(key, f'`"GPU"` read from `{name}`, named like {what}: on Ascend Ray counts "NPU", so this is '
                    "always 0 or missing", _ROUTE)

    def _owner(self, node: cst.CSTNode) -> str | None:
        """The name the dict (or the list holding it) is assigned to, returned from, or stored under."""
        child, parent = node, self.ctx.parent(node)
        while isinstance(parent, _CONTAINERS):
            child, parent = parent, self.ctx.parent(parent)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            return _name(parent.targets[0].target)
        if isinstance(parent, (cst.AnnAssign, cst.AugAssign)):
            return _name(parent.target)
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            return parent.keyword.value
        if isinstance(parent, cst.DictElement) and child is parent.value:
            return string_value(parent.key) if isinstance(parent.key, cst.SimpleString) else None
        if isinstance(parent, cst.Return):
            function = next((a for a in self.ctx.ancestors(parent) if isinstance(a, cst.FunctionDef)), None)
            return function.name.value if function is not None else None
        return None
