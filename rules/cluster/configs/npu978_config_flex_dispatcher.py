"""NPU978: Megatron's flex (DeepEP/HybridEP) MoE dispatcher set in YAML, JSON or TOML configs."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.python.npu956_deep_ep_nvshmem import DISPATCH
from npu_migrate.rules.cluster.shell.npu967_megatron_launcher import megatron_setting

#: a JSON or TOML ``true`` right after a key (their readers see string scalars only)
_TRUE_AFTER_KEY = re.compile(rb"\s*[:=]\s*true\b")
#: a Hydra override or ``key=value`` argument held in one string (``model.moe_token_dispatcher_type=flex``)
_OVERRIDE = re.compile(r"[+~]*(?P<name>[\w.\-]+)=(?P<value>\S+)")


def _name(key: str) -> str:
    """``--moe-enable-deepep`` -> ``moe_enable_deepep``."""
    return key.lstrip("-").replace("-", "_")


class ConfigFlexDispatcher(ConfigRule):
    id = "NPU978"
    name = "config-flex-dispatcher"
    impact = "blocking"
    fixable = False
    summary = ("Report Megatron's flex MoE token dispatcher (DeepEP/HybridEP) turned on in config files: "
               "`moe_token_dispatcher_type: flex`, `moe_enable_deepep: true`, the same as overrides and arguments")
    triggers = (b"moe_token_dispatcher_type", b"moe_enable_deepep", b"moe-token-dispatcher-type", b"moe-enable-deepep")
    rationale = f"""
The config-file form of NPU956 (Python) and NPU967 (launch scripts), with the same keys
and values: Megatron-LM's `moe_token_dispatcher_type: flex` runs the DeepEP/HybridEP
backend (`moe_flex_dispatcher_backend`, `"deepep"` by default) and `moe_enable_deepep:
true` is its older switch (megatron/core/transformer/transformer_config.py at d98e8a64);
both are CUDA-only (NVSHMEM). Read as a mapping entry at any depth (Megatron YAML args,
Megatron-Bridge and NeMo recipes, verl's `override_transformer_config`), a JSON or TOML
`true`, a Hydra override string (`model.moe_token_dispatcher_type=flex`) and a command-line
argument list (`["--moe-token-dispatcher-type", "flex"]`, `--moe-enable-deepep`), and
Megatron-LM's test recipes' argument mappings (`--moe-token-dispatcher-type: flex`). The
backend name alone (`moe_flex_dispatcher_backend: deepep`) and other dispatchers
(`alltoall`, `allgather`) are left alone, as in NPU956. Route: {DISPATCH}.
"""
    examples = (
        Example("model:\n  num_moe_experts: 64\n  moe_token_dispatcher_type: flex  # reported\n"),
        Example("moe_enable_deepep: true  # reported\n"),
        Example("model:\n  moe_token_dispatcher_type: alltoall\n  moe_flex_dispatcher_backend: deepep\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key:
            if (_name(scalar.keys[-1]) == "moe_enable_deepep" and self.file.document.format in ("JSON", "TOML")
                    and _TRUE_AFTER_KEY.match(self.file.data, scalar.end)):
                self._report(scalar, "moe_enable_deepep", "true")
            return
        value = scalar.value.strip()
        key = _name(scalar.key or "")
        if key in ("moe_token_dispatcher_type", "moe_enable_deepep"):
            # a mapping entry, also keyed the way Megatron-LM's test recipes write arguments
            # (`--moe-token-dispatcher-type: flex` under MODEL_ARGS): its value decides
            if megatron_setting(key, value) == "deepep":
                self._report(scalar, key, value)
            return
        previous = self.file.previous
        if (previous is not None and not previous.is_key and previous.value.startswith("--")
                and previous.value.replace("_", "-") == "--moe-token-dispatcher-type"
                and megatron_setting(previous.value, value) == "deepep"):
            self._report(scalar, "moe_token_dispatcher_type", value)
        elif value.replace("_", "-") == "--moe-enable-deepep":  # a store_true option
            self._report(scalar, "moe_enable_deepep", "true")
        else:
            match = _OVERRIDE.fullmatch(value)
            if match and megatron_setting(match["name"], match["value"]) == "deepep":
                self._report(scalar, match["name"].rpartition(".")[2].replace("-", "_"), match["value"].strip("\"'"))

    def _report(self, scalar, key: str, value: str) -> None:
        shown = "True" if key == "moe_enable_deepep" else f'"{value}"'
        self.report(scalar, f"`{key}={shown}` sends Megatron's MoE tokens through DeepEP/HybridEP "
                    "(NVSHMEM, CUDA-only)", DISPATCH)
