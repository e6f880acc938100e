"""What each end-to-end training script is, how it is run and how closely its
migrated run must match its CPU reference (see docs/e2e.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

EXACT = None  # fp32 programs: losses and every parameter/buffer bit for bit


@dataclass(frozen=True)
class Tolerance:
    """For float16 autocast. The emulated NPU casts with CUDA's autocast op lists,
    the CPU reference with the CPU's (which keep different ops in float32), so the
    two programs round differently; the bound is on the absolute difference."""

    loss_atol: float
    state_atol: float


@dataclass(frozen=True)
class KilledResume:
    """A job killed by SIGKILL right after it saved the checkpoint of ``kill_at``
    (``E2E_KILL_AFTER_SAVE``, see e2e_report.py), then resumed. ``{dir}`` in the
    arguments is the job's directory: the killed job and its resume share one, the
    uninterrupted job has its own."""

    run: tuple[str, ...]  # the uninterrupted job, and the job that gets killed
    resume: tuple[str, ...]
    kill_at: int


@dataclass(frozen=True)
class Script:
    name: str
    covers: str
    distributed: bool = False
    tolerance: Tolerance | None = EXACT
    # findings npu-migrate may report without the script being rejected
    informational: frozenset[str] = frozenset()
    # a finding that rejects the script (it is not expected to run as migrated)
    rejected_by: str | None = None
    # arguments for an uninterrupted run, a run that stops and saves, and its resume
    resume: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None
    resume_nproc: int = 1
    # killed after a save, resumed: losses and loss scales must continue bit for bit
    killed: KilledResume | None = None
    # extra-notes that exist only in the migrated run (accelerator statistics)
    npu_only_notes: frozenset[str] = field(default_factory=frozenset)
    # made data parallel by NPU510/NPU511: also run as two processes against one process
    # with the same global batch, under torchrun with one process, and resumed from a
    # checkpoint the original (its CPU reference) wrote, and the other way round
    data_parallel: DataParallelProof | None = None
    # rules the script is migrated with on top of the defaults (opt-in rules)
    extend_select: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataParallelProof:
    """How a script made data parallel is checked (tests/e2e/test_data_parallel.py).

    ``global_order``: the CPU reference takes ``--global-order`` and then reads the
    data in the order the two-process job reads it (its loader is sharded); without
    it every process reads the same batches, and the two-process run must equal the
    one-process reference bit for bit. ``stop``/``resume``: arguments for a run that
    saves a checkpoint and stops, and for one that resumes from it. ``exact_notes``:
    notes that must be equal even where values are compared within a tolerance."""

    global_order: bool = True
    stop: tuple[str, ...] = ("--epochs", "1", "--save", "{ckpt}")
    resume: tuple[str, ...] = ("--resume", "{ckpt}")
    exact_notes: frozenset[str] = frozenset()


AMP_TOLERANCE = Tolerance(loss_atol=2e-3, state_atol=2e-3)
# Two DDP processes against one process with the same global batch, fp32: DDP averages
# the two half-batch gradients, so only summation order differs. Measured maxima on the
# data-parallel scripts: 9e-8 on parameters, 2.4e-7 on the loss (the mean of the ranks'
# losses against the one-process loss).
GLOBAL_BATCH_TOLERANCE = Tolerance(loss_atol=1e-6, state_atol=1e-6)

SCRIPTS = (
    Script(
        "ddp_amp_resume",
        "DDP + torch.cuda.amp + GradScaler/RNG state in the checkpoint, exact resume, map_location=cuda:N",
        distributed=True,
        tolerance=AMP_TOLERANCE,
        resume=((), ("--save", "{ckpt}", "--stop-after", "1"), ("--resume", "{ckpt}")),
        resume_nproc=2,
    ),
    Script(
        "data_parallel",
        "nn.DataParallel(model).cuda(), cudnn flags, best-model checkpoint of model.module, batches from a generator",
        # NPU510: no DataLoader to shard (every process trains on the same batches)
        informational=frozenset({"NPU602", "NPU510"}),
        data_parallel=DataParallelProof(global_order=False, stop=("--steps", "20", "--save", "{ckpt}"),
                                        resume=None),
    ),
    Script(
        "dp_device_ids",
        "DataParallel(model, device_ids=[...], output_device=...), cuda:0 and .cuda(0), sharded loader, epoch checkpoint",
        data_parallel=DataParallelProof(),
    ),
    Script(
        "dp_gate",
        "module-level script: `if device == 'cuda': net = DataParallel(net)`, global loaders read by train(epoch), "
        "best-accuracy checkpoint with module. keys",
        data_parallel=DataParallelProof(exact_notes=frozenset({"acc_epoch0", "acc_epoch1"})),
    ),
    Script(
        "dp_module_checkpoint",
        "DataParallel(model).cuda(), model.module param groups, isinstance unwrapping, module.-prefixed checkpoint",
        data_parallel=DataParallelProof(exact_notes=frozenset({"head_weight_keys", "export_keys", "checkpoint_keys"})),
    ),
    Script(
        "single_device_ddp",
        "single-GPU script made data parallel by the opt-in NPU511: AdamW, StepLR, clipping, epoch checkpoint",
        data_parallel=DataParallelProof(exact_notes=frozenset({"checkpoint_keys"})),
        extend_select=("NPU511",),
    ),
    Script("device_strings", "every device-string idiom: defaults, dicts, comparisons, f/%/+/format, torch.device(x, i)"),
    Script("alias_imports", "torch as T, torch.cuda as tcuda, from torch import cuda, renamed from-imports, nccl",
           distributed=True),
    Script("cuda_runtime_apis", "torch.cuda seeding, RNG state, memory stats, empty_cache, synchronize, events, dropout",
           npu_only_notes=frozenset({"peak_memory_bytes"})),
    Script(
        "amp_scaler_resume",
        "GradScaler state round trip through a checkpoint loaded without map_location",
        tolerance=AMP_TOLERANCE,
        resume=(("--steps", "24"), ("--steps", "24", "--stop-at", "10", "--save", "{ckpt}"),
                ("--steps", "24", "--resume", "{ckpt}")),
    ),
    Script("dataloader_no_sampler", "DDP with a shuffled DataLoader and no DistributedSampler", distributed=True),
    Script("cnn_batchnorm", "Conv2d + BatchNorm2d (running stats, eval mode), DDP buffer broadcast",
           distributed=True, informational=frozenset({"NPU602"})),
    Script("transformer_block", "causal transformer: SDPA, LayerNorm, GELU, tied head, AdamW, clipping, TF32 flags"),
    Script("compile_eager", 'torch.compile(model, backend="eager") on a .cuda() model'),
    Script("profiler_schedule", "torch.profiler with CPU+CUDA activity, schedule, tensorboard_trace_handler, "
           "record_function: must become torch_npu.profiler and write one trace per cycle"),
    Script(
        "scaler_module_level",
        "module-level script: `checkpoint` loaded, reused and rebound to the saved dict; no scaler state saved",
        tolerance=AMP_TOLERANCE,
        killed=KilledResume(run=("--out-dir", "{dir}"), resume=("--out-dir", "{dir}", "--init-from", "resume"),
                            kill_at=8),
    ),
    Script(
        "scaler_created_late",
        "auto-resume that reads the checkpoint before the GradScaler exists; dict(...) checkpoint",
        tolerance=AMP_TOLERANCE,
        killed=KilledResume(run=("--checkpoint-dir", "{dir}"), resume=("--checkpoint-dir", "{dir}"), kill_at=2),
    ),
    Script(
        "scaler_dict_call",
        "torch.save(dict(epoch=..., model=..., opt=...)) with an optimizer named opt, --resume",
        tolerance=AMP_TOLERANCE,
        killed=KilledResume(run=("--ckpt", "{dir}/ckpt.pt"), resume=("--ckpt", "{dir}/ckpt.pt", "--resume",
                                                                     "{dir}/ckpt.pt"), kill_at=2),
    ),
)

BY_NAME = {s.name: s for s in SCRIPTS}
