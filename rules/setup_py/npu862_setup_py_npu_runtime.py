"""NPU862: add ``npu-runtime==X`` to ``setup.py``'s install_requires when the migrated
code imports npu_runtime."""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from npu_migrate.python.rule import Example

from ._requirements import SetupRequirementsRule, appender


def _names_runtime(text: str) -> bool:
    try:
        return canonicalize_name(Requirement(text).name) == "npu-runtime"
    except InvalidRequirement:
        return False


class SetupPyNpuRuntime(SetupRequirementsRule):
    id = "NPU862"
    name = "setup-py-npu-runtime"
    summary = "Add `npu-runtime==X` to setup()'s install_requires when the migrated code imports npu_runtime"
    triggers = ("install_requires",)
    rationale = """
The setup.py counterpart of NPU854 (see there for when: some file of the run
imports npu_runtime after the migration, and the runtime is not vendored):
`"npu-runtime==X"` goes after the last requirement of the literal
`install_requires` list of `setup()` (or of the module-level list it names), in
that element's quotes and the list's layout. extras_require and tests_require
are left alone; a list built at run time (read from requirements.txt) is not
touched: that file gets it from NPU854. A list that already names npu-runtime
is left alone.
"""
    examples = (
        Example("from setuptools import setup\nsetup(name='x', install_requires=['numpy'])\n"),  # no npu_runtime imported
    )

    def check(self, lists) -> None:
        requirement = self.ctx.facts.runtime_requirement
        if requirement is None or self.ctx.facts.runtime_only_in_scripts:
            # nothing imports it, or only the scripts of a library do: `pip install <library>`
            # must not need npu-runtime (the scripts' requirements file, or the finding, says it)
            return
        for lst in lists:
            if lst.where != "install_requires" or not lst.items:
                continue
            if any(_names_runtime(text) for _, text in lst.items):
                continue
            element, _ = lst.items[-1]
            self.replace(lst.node, appender(requirement),
                         f"add `{requirement}`: the migrated code imports npu_runtime", needs_torch_npu=False,
                         anchor=element)
