"""NPU977: AReaL allocation strings that roll out with SGLang or vLLM (``backend: "sglang:d4p1t1"``)."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster._vllm import ROUTE as VLLM_ROUTE

KEYS = frozenset({"backend", "allocation_mode"})
#: one inference component of AReaL's allocation grammar (areal/api/alloc_mode.py at 4aef98d8:
#: ``INFER_BACKEND ("[" NAME "]")? ":" inf_dim+``, ``INF_DIM_TYPE: "d" | "t" | "p"``; the
#: older ``sglang.d4p1t1`` form separated with a dot)
_ENGINE = re.compile(r"\(?(sglang|vllm)(?:\[[A-Za-z_]\w*\])?[:.](?:[dtp][1-9]\d*)+\)?")
_COMPONENTS = re.compile(r"[+|]")
#: `npu` or `ascend` as a word of a file or directory name (`gsm8k_grpo_npu.yaml`, `vlm_npu`)
_ASCEND_WORD = re.compile(r"(?<![a-z0-9])(?:npu|ascend)(?![a-z0-9])")

SGLANG = (
    "AReaL on Ascend rolls out with vLLM and the vllm-ascend plugin (its docs/en/tutorial/installation_npu.md "
    "and examples/math/gsm8k_grpo_npu.yaml, `backend: \"vllm:d4p1t1\"`): write `{vllm}` and move this file's "
    "`sglang:` engine settings to `vllm:`; SGLang also has an Ascend build of its own (docs.sglang.io, "
    "\"Ascend NPUs\": CANN images quay.io/ascend/sglang:<version>-cann<CANN>-<910b|a3>), which AReaL's NPU "
    "guide does not use"
)


def engines(value: str) -> list[str]:
    """The inference engines an AReaL allocation string names (``sglang:d2+fsdp:d4`` -> ["sglang"])."""
    found = []
    for part in _COMPONENTS.split(value.replace(" ", "")):
        match = _ENGINE.fullmatch(part)
        if match:
            found.append(match.group(1))
    return found


class ArealRolloutBackend(ConfigRule):
    id = "NPU977"
    name = "areal-rollout-backend"
    impact = "blocking"
    fixable = False
    summary = ("Report AReaL allocation strings (`rollout.backend`, `allocation_mode`) that roll out with SGLang "
               "(AReaL's Ascend path is vLLM + vllm-ascend) or with vLLM (needs the vllm-ascend plugin), and verl's "
               "`rollout: name: vllm`")
    triggers = (b"sglang", b"vllm")
    rationale = f"""
AReaL picks its rollout engine and its parallel layout in one string, `rollout.backend:
"sglang:d4p1t1"` or the older top-level `allocation_mode: sglang:d4p1t1+d4p1t1`
(`sglang[rollout]:d2+fsdp[actor]:d4`, components joined with `+` or `|`; AReaL's grammar
in areal/api/alloc_mode.py). Only inference components that parse as AReaL's
(`sglang`/`vllm`, an optional `[name]`, then `d`/`t`/`p` degrees) under a `backend` or
`allocation_mode` key are read. `sglang:`: {SGLANG.format(vllm="vllm:<the same degrees>")}.
`vllm:`: nothing in the string changes; {VLLM_ROUTE}. verl's `rollout: name: vllm` (its
`ppo_trainer.yaml` default, the YAML form of the `actor_rollout_ref.rollout.name=vllm` override
NPU965 reports in launchers) is reported the same way. A file whose name or directory says `npu`
or `ascend` (AReaL's `gsm8k_grpo_npu.yaml`, `vlm_npu/`) is already the Ascend variant: its `vllm:`
strings are left alone. Never rewritten: the engine's own settings
(`sglang:` / `vllm:` sections) must move with it.
"""
    examples = (
        Example('rollout:\n  backend: "sglang:d4p1t1"  # reported\n'),
        Example("allocation_mode: vllm:d4p1t2+d4p1t1c2  # reported\n"),
        Example('actor:\n  backend: "fsdp:d4"\nrollout:\n  backend: sglang\n'),
    )

    def visit_scalar(self, scalar) -> None:
        if (not scalar.is_key and scalar.value.strip() == "vllm" and len(scalar.keys) >= 2
                and scalar.keys[-1] == "name" and scalar.keys[-2] == "rollout" and not self._ascend_file()):
            # verl's `actor_rollout_ref: rollout: name: vllm` (its ppo_trainer.yaml default,
            # held-out round 20's TinyZero): the YAML form of the override NPU965 reports
            self.report(scalar, "`rollout.name: vllm` rolls out with vLLM, which needs the vllm-ascend plugin on Ascend",
                        VLLM_ROUTE)
            return
        if scalar.is_key or scalar.key not in KEYS:
            return
        found = engines(scalar.value)
        if "sglang" in found:
            dims = re.sub(r"sglang(?=[\[:.])", "vllm", scalar.value.strip())
            self.report(scalar, f"AReaL allocation `{scalar.value.strip()}` rolls out with SGLang",
                        SGLANG.format(vllm=dims))
        elif "vllm" in found and not self._ascend_file():
            self.report(scalar, f"AReaL allocation `{scalar.value.strip()}` rolls out with vLLM, which needs the "
                        "vllm-ascend plugin on Ascend", VLLM_ROUTE)

    def _ascend_file(self) -> bool:
        # the file's name or its directory (AReaL's `examples/vlm_npu/`)
        parts = self.file.path.replace("\\", "/").lower().split("/")[-2:]
        return any(_ASCEND_WORD.search(part) for part in parts)
