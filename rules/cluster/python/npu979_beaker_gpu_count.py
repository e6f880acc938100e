"""NPU979: GPU requests of Beaker specs built in Python (``["resources"]["gpuCount"] = n``, ``TaskResources(gpu_count=n)``)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster.configs.npu976_beaker_gpu_count import ROUTE

#: beaker-py's resource classes (``beaker.TaskResources``; older releases and gantry
#: re-export it as ``BeakerTaskResources``)
_RESOURCE_CLASSES = ("TaskResources", "BeakerTaskResources")


def _zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.value == "0"


def _subscript_key(node: cst.BaseExpression) -> str | None:
    """``"gpuCount"`` for ``x["gpuCount"]``."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return string_value(node.slice[0].slice.value)
    return None


class BeakerGpuCountPython(Rule):
    id = "NPU979"
    name = "beaker-gpu-count-python"
    impact = "blocking"
    fixable = False
    summary = ("Report Beaker GPU requests built in Python: a `gpuCount` under a spec's `resources` "
               "(`spec[\"resources\"][\"gpuCount\"] = n`, `{\"resources\": {\"gpuCount\": n}}`) and beaker-py's "
               "`TaskResources(gpu_count=n)`")
    triggers = ("gpuCount", "gpu_count")
    rationale = f"""
The Python form of NPU976. Launchers build Beaker specs as dicts before handing them to
`beaker experiment create` or beaker-py (open-instruct's `submit_*_job.py`:
`d1["tasks"][0]["resources"]["gpuCount"] = args.num_gpus`, `"resources": {{"gpuCount":
args.num_gpus}}`) or with beaker-py's classes (`beaker.BeakerTaskResources(gpu_count=...)`).
Read: an assignment to `...["resources"]["gpuCount"]`, a `"gpuCount"` entry of a dict that
is the value of a `"resources"` entry, and the `gpu_count=` keyword of beaker's
`TaskResources`/`BeakerTaskResources` (by qualified name). A literal `0` is left alone; reads
of the count are not requests. Route: {ROUTE}.
"""
    examples = (
        Example('d1["tasks"][0]["resources"]["gpuCount"] = args.num_gpus  # reported\n'),
        Example('task = {"resources": {"gpuCount": 0}}\nn = task["resources"]["gpuCount"]\n'),
        Example("import beaker\nres = beaker.BeakerTaskResources(gpu_count=8)  # reported\n"),
    )

    def visit_Assign(self, node: cst.Assign) -> None:
        if _zero(node.value):
            return
        for target in node.targets:
            if _subscript_key(target.target) == "gpuCount" and _subscript_key(target.target.value) == "resources":
                self._report(node, "`[\"resources\"][\"gpuCount\"]`")

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if string_value(node.key) != "resources" or not isinstance(node.value, cst.Dict):
            return
        for element in node.value.elements:
            if (isinstance(element, cst.DictElement) and string_value(element.key) == "gpuCount"
                    and not _zero(element.value)):
                self._report(element, '`"resources": {"gpuCount": ...}`')

    def visit_Call(self, node: cst.Call) -> None:
        name = self.qualified_name(node.func)
        if name is None or not name.startswith("beaker.") or name.rpartition(".")[2] not in _RESOURCE_CLASSES:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "gpu_count" and not _zero(arg.value):
                self._report(arg, f"`{name.rpartition('.')[2]}(gpu_count=...)`")

    def _report(self, node: cst.CSTNode, what: str) -> None:
        self.report(node, f"{what} asks Beaker for GPUs; Beaker has no NPU request", ROUTE)
