"""NPU972: setup.py's requirement lists that declare Megatron-LM are told how MindSpeed is installed."""

from __future__ import annotations

from npu_migrate.deps import pairing
from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster import _mindspeed
from npu_migrate.rules.setup_py._requirements import SetupRequirementsRule


class SetupPyMindSpeed(SetupRequirementsRule):
    id = "NPU972"
    name = "setup-py-mindspeed"
    impact = "blocking"
    summary = ("Report `megatron-core`/`megatron-lm` in setup.py's literal requirement lists: on Ascend Megatron-LM "
               "needs MindSpeed, installed from source at the branch paired with the Megatron release")
    fixable = False
    triggers = (("megatron", "install_requires"), ("megatron", "extras_require"))
    rationale = f"""
The setup.py counterpart of NPU971 (same decision, `rules/cluster/_mindspeed.py`):
a literal `install_requires` / `extras_require` entry naming `megatron-core` (or
`megatron-lm` as a git URL) gets a finding with MindSpeed's source install
(`git clone {_mindspeed.REPOSITORY}`, `git checkout <branch>`, `pip install -e
MindSpeed`) and the branch that pairs with the pinned release where one does; nothing
is added, since {_mindspeed.PLACEHOLDER}. A setup.py that already names `mindspeed`
is left alone.
"""
    examples = (
        Example("from setuptools import setup\nsetup(name='x', install_requires=[\n"
                "    'megatron-core==0.8.0',  # reported: branch 2.1.0_core_r0.8.0\n])\n"),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['megatron-core', 'mindspeed'])\n"),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['numpy'])\n"),
    )

    def check(self, lists) -> None:
        parsed = [(element, text, pairing.parse(text)) for lst in lists for element, text in lst.items]
        parsed = [(element, text, requirement) for element, text, requirement in parsed if requirement is not None]
        if any(pairing.name_of(r) == "mindspeed" for _, _, r in parsed):
            return
        for element, text, requirement in parsed:
            if pairing.name_of(requirement) in _mindspeed.NAMES:
                self.report(element, *_mindspeed.advice(text, str(requirement.specifier), requirement.url))
