"""NPU903: NVIDIA apex (amp, fused optimizers and layers, parallel) has no automatic migration."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

_NATIVE_AMP = (
    'use native AMP: scaler = torch.amp.GradScaler("npu"), and wrap the forward pass in '
    'with torch.autocast("npu", dtype=torch.float16): (O1; for O2/O3 prefer dtype=torch.bfloat16, which needs no '
    "scaler); drop the amp.initialize call and keep the model and optimizer as they are"
)
_FUSED_ADAM = (
    "torch_npu.optim.NpuFusedAdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay) (apex's FusedAdam "
    "defaults to adam_w_mode=True; use torch_npu.optim.NpuFusedAdam for adam_w_mode=False), or "
    "torch.optim.AdamW(params, ..., fused=True), whose fused kernel torch_npu 2.13 implements"
)
_MULTI_TENSOR = (
    "use torch's foreach ops (torch._foreach_mul_, torch._foreach_add_, torch._foreach_norm) or "
    "torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True); they dispatch to NPU kernels"
)

USES = {
    "apex.amp.initialize": _NATIVE_AMP,
    "apex.amp.scale_loss": (
        "with native AMP: scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update() "
        '(scaler = torch.amp.GradScaler("npu"))'
    ),
    "apex.amp.master_params": "native AMP keeps the fp32 weights in the model: use model.parameters()",
    "apex.amp.state_dict": "save scaler.state_dict() of the torch.amp.GradScaler instead",
    "apex.amp.load_state_dict": "restore with scaler.load_state_dict(...) of the torch.amp.GradScaler instead",
    "apex.optimizers.FusedAdam": _FUSED_ADAM,
    "apex.optimizers.fused_adam.FusedAdam": _FUSED_ADAM,
    "apex.optimizers.FusedLAMB": "torch_npu.optim.NpuFusedLamb (same hyper-parameters)",
    "apex.optimizers.FusedSGD": "torch_npu.optim.NpuFusedSGD, or torch.optim.SGD(params, ..., fused=True)",
    "apex.normalization.FusedLayerNorm": "torch.nn.LayerNorm(normalized_shape, eps=eps, elementwise_affine=...) (same arguments)",
    "apex.normalization.FusedRMSNorm": "torch.nn.RMSNorm(normalized_shape, eps=eps), or torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]",
    "apex.normalization.fused_layer_norm": "torch.nn.LayerNorm / torch.nn.RMSNorm (same arguments)",
    "apex.parallel.DistributedDataParallel": (
        "torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank]) after "
        'torch.distributed.init_process_group("hccl"); apex\'s delay_allreduce has no counterpart'
    ),
    "apex.parallel.SyncBatchNorm": "torch.nn.SyncBatchNorm (torch_npu implements its kernels)",
    "apex.parallel.convert_syncbn_model": "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)",
    "apex.multi_tensor_apply": _MULTI_TENSOR,
    "amp_C": _MULTI_TENSOR,
}


class Apex(CudaOnlyPackage):
    id = "NPU903"
    impact = "blocking"
    name = "apex"
    summary = "Report NVIDIA apex imports and uses (amp, fused optimizers and norms, parallel); suggest native AMP and torch_npu optimizers"
    label = "apex"
    packages = ("apex", "amp_C", "apex_C", "fused_layer_norm_cuda")
    problem = (
        "NVIDIA apex builds CUDA extensions and does not run on Ascend (Huawei's patched port, Apex for Ascend, "
        "is a separate build)"
    )
    import_suggestion = (
        'move to native AMP (torch.autocast("npu") + torch.amp.GradScaler("npu")) and torch / torch_npu.optim '
        "optimizers (each use has its own finding), or install Apex for Ascend (gitcode.com/Ascend/apex) to keep apex"
    )
    uses = USES
    triggers = ("apex", "amp_C", "apex_C", "fused_layer_norm_cuda")
    rationale = """
apex predates `torch.amp`: its `amp.initialize`/`amp.scale_loss` loop, fused
optimizers, fused norms and `apex.parallel` all sit on CUDA extensions. The
Ascend targets, checked against the torch-npu 2.13.0 wheel:

* `amp.initialize` + `amp.scale_loss` -> `torch.autocast("npu", dtype=...)` and
  `torch.amp.GradScaler("npu")` (`scaler.scale(loss).backward()`, `scaler.step`, `scaler.update`);
* `FusedAdam` -> `torch_npu.optim.NpuFusedAdamW` (apex's default `adam_w_mode=True`) or
  `NpuFusedAdam`; `torch.optim.AdamW(fused=True)` also works, since torch_npu
  registers `_fused_adamw_` for NPU; `FusedLAMB` -> `NpuFusedLamb`; `FusedSGD` -> `NpuFusedSGD`;
* `FusedLayerNorm`/`FusedRMSNorm` -> `torch.nn.LayerNorm`/`torch.nn.RMSNorm` (or `torch_npu.npu_rms_norm`);
* `apex.parallel.DistributedDataParallel` -> torch's DDP with HCCL; `SyncBatchNorm` -> `torch.nn.SyncBatchNorm`;
* `multi_tensor_applier`/`amp_C` -> `torch._foreach_*` ops.

Nothing is rewritten: the amp loop spans several statements (initialize, the
`with amp.scale_loss(...)` block, checkpoint state), and optimizer defaults differ.
Teams that must keep apex can build Huawei's Apex for Ascend instead.
"""
    examples = (
        Example("from apex import amp  # reported\n"),
        Example("import torch\nscaler = torch.amp.GradScaler('npu')\n"),
    )
