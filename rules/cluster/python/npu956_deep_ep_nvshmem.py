"""NPU956: DeepEP and NVSHMEM are CUDA-only (expert-parallel all-to-all over NVLink/RDMA)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster.python._common import ExternalCudaOnly

ROUTE = (
    "DeepEP and NVSHMEM have no Ascend build: dispatch and combine the tokens with "
    "torch.distributed.all_to_all_single over HCCL, or torch_npu's fused MoE ops "
    "torch_npu.npu_moe_distribute_dispatch / torch_npu.npu_moe_distribute_combine, and keep the DeepEP path for CUDA"
)

#: Megatron's MoE settings that run DeepEP/HybridEP (megatron/core/transformer/transformer_config.py
#: at d98e8a64: ``moe_flex_dispatcher_backend: Literal['deepep', 'hybridep', 'ncclep'] = "deepep"``,
#: used by ``moe_token_dispatcher_type == "flex"``; ``moe_enable_deepep`` is the deprecated switch)
#: The backend alone (``moe_flex_dispatcher_backend="deepep"``) is not a setting that turns it on:
#: Megatron reads it only under the flex dispatcher (Megatron-Bridge's recipes set it on its own
#: and switch to flex per GPU).
_SETTINGS = {"moe_token_dispatcher_type": {"flex"}}
_DISPATCH = (
    "MindSpeed (at 028de58c) has no flex dispatcher; its MoE options check `alltoall`, `alltoall_seq` and "
    "`allgather` (mindspeed/arguments.py, mindspeed/features_manager/moe): set `moe_token_dispatcher_type` to "
    "`alltoall` for Ascend and keep DeepEP for CUDA"
)
#: the suggestion, shared with the config-file form (NPU978)
DISPATCH = _DISPATCH


def deepep_setting(key: str, value: cst.BaseExpression) -> str | None:
    """``key=value`` (a keyword, an assignment's last name or a dict key) turns Megatron's DeepEP
    dispatch on: the shown value, else None."""
    if key == "moe_enable_deepep":
        return "True" if isinstance(value, cst.Name) and value.value == "True" else None
    text = string_value(value)
    return f'"{text}"' if text is not None and text in _SETTINGS.get(key, ()) else None


class DeepEpNvshmem(ExternalCudaOnly):
    id = "NPU956"
    impact = "blocking"
    name = "deep-ep-nvshmem"
    summary = ("Report DeepEP (`deep_ep`) and NVSHMEM imports, and Megatron's flex (DeepEP/HybridEP) MoE dispatcher "
               "set in code: expert-parallel communication built on CUDA only")
    label = "DeepEP/NVSHMEM"
    packages = ("deep_ep", "nvshmem", "pynvshmem")
    problem = "DeepEP's kernels and NVSHMEM (GPU-initiated communication over NVLink/InfiniBand) are built for CUDA only"
    import_suggestion = ROUTE
    triggers = ("deep_ep", "nvshmem", "moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_enable_deepep")
    rationale = f"""
DeepEP (`import deep_ep`: `deep_ep.Buffer`, `dispatch`/`combine`, its low-latency
mode) is a CUDA extension on top of NVSHMEM (`nvshmem`, nvshmem4py, `pynvshmem`);
MoE frameworks import it at module level for expert parallelism. Neither has an
Ascend build, so the import fails and the model cannot be built. Route: {ROUTE}.
A guarded import (`try:` / `if`) is reported as such: make sure the fallback is
the path taken on NPU. The torch_npu op names are checked against the
torch_npu API table (`npu_migrate/data/torch_npu_api.json`).

Megatron-LM reaches DeepEP through its config, not an import in the project: the flex
MoE token dispatcher (`moe_token_dispatcher_type="flex"`) runs the backend named by
`moe_flex_dispatcher_backend` (`"deepep"` by default, `"hybridep"`), and
`moe_enable_deepep=True` is the older switch (megatron/core/transformer/transformer_config.py
at d98e8a64). Those two values are reported where the file writes them: as keyword
arguments, assignments (`cfg.model.moe_token_dispatcher_type = "flex"`, Megatron-Bridge's
recipes), annotated defaults and dict entries. Route: {_DISPATCH}. The backend name on
its own, comparisons and other values (`"alltoall"`, `False`) are left alone: Megatron
reads the backend only under the flex dispatcher.
"""
    examples = (
        Example("from deep_ep import Buffer, EventOverlap  # reported\n"),
        Example("import torch.distributed as dist\n"),
        Example('cfg.model.moe_token_dispatcher_type = "flex"  # reported\n'),
    )

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._setting(node, node.keyword.value, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(node, target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._target(node, node.target, node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = string_value(node.key)
        if key is not None:
            self._setting(node, key, node.value)

    def _target(self, node: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        name = target.attr.value if isinstance(target, cst.Attribute) else \
            target.value if isinstance(target, cst.Name) else None
        if name is not None:
            self._setting(node, name, value)

    def _setting(self, node: cst.CSTNode, key: str, value: cst.BaseExpression) -> None:
        shown = deepep_setting(key, value)
        if shown is not None:
            self.report(node, f"`{key}={shown}` sends Megatron's MoE tokens through DeepEP/HybridEP "
                        "(NVSHMEM, CUDA-only)", _DISPATCH)
