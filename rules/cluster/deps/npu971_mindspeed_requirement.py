"""NPU971: a dependency file that declares Megatron-LM is told how MindSpeed is installed."""

from __future__ import annotations

from packaging.utils import canonicalize_name

from npu_migrate.deps.rule import DepsRule, Example
from npu_migrate.rules.cluster import _mindspeed


class MindSpeedRequirement(DepsRule):
    id = "NPU971"
    name = "mindspeed-requirement"
    impact = "blocking"
    summary = ("Report `megatron-core`/`megatron-lm` requirements: on Ascend Megatron-LM needs MindSpeed, installed "
               "from source at the branch paired with the Megatron release (no index serves it)")
    triggers = (b"megatron",)
    fixable = False
    rationale = f"""
Megatron-LM runs on Ascend through MindSpeed (`import mindspeed.megatron_adaptor`,
added by NPU966), so a project that declares `megatron-core` (or `megatron-lm` as a
git URL) also needs MindSpeed. MindSpeed's README and install guide
(`docs/zh/user-guide/install_guide.md`) install it from source only: `git clone
{_mindspeed.REPOSITORY}`, `git checkout <branch>`, `pip install -e MindSpeed`,
with the branch that pairs with the Megatron-LM release. No line is written because
none would install as written: {_mindspeed.PLACEHOLDER} (`pip download --no-deps
mindspeed`, 2026-11-28), and a git URL to gitcode.com could not be checked.

So the requirement gets a finding with the exact commands. Where it pins one
megatron-core release (`==X.Y.Z`, or a git URL at a Megatron-LM ref such as
`@core_v0.12.1`) that a MindSpeed branch's README names, the finding names that
branch; otherwise it lists the pairs that exist (each branch's README, Ascend/MindSpeed
at 028de58c): {_mindspeed.table()}. A file that already names `mindspeed` is left
alone. setup.py's lists have their own rule (NPU972).
"""
    examples = (
        Example("torch==2.7.1\nmegatron-core==0.12.1  # reported: branch 26.1.0_core_r0.12.1\n"),
        Example("megatron-core>=0.8  # reported with the pairs that exist\n"),
        Example("megatron-core==0.12.1\nmindspeed @ file:///opt/MindSpeed\n"),
        Example("torch==2.7.1\nnumpy\n"),
    )

    def check(self, document) -> None:
        entries = [e for lst in document.lists for e in lst.entries if e.name and not e.conda]
        if any(canonicalize_name(e.name) == "mindspeed" for e in entries):
            return
        for entry in entries:
            if canonicalize_name(entry.name) not in _mindspeed.NAMES:
                continue
            requirement = entry.requirement
            url = requirement.url if requirement is not None else None
            self.report_entry(entry, *_mindspeed.advice(entry.shown, entry.specifier, url))
