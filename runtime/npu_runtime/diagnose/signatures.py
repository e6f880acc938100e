"""The failure signatures ``diagnose`` knows: one entry per signature, data only.

Each entry says how the failure shows in a CANN / HCCL / torch_npu / torch log (regular
expressions matched against one line), what it means, what to do, and whether an
automatic restart can help. ``rank`` orders causes when one failure triggers others:
a lower rank is closer to the root (an ECC error on one rank makes the other ranks'
collectives time out, so the ECC error is reported first). ``sources`` says where the
shape and the advice come from (public documents and issue trackers).

To add a signature: append an entry, and add a log excerpt in the shape the real tool
prints to ``tests/diagnose/test_signatures.py`` (the test checks every entry has one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import exitcodes


@dataclass(frozen=True)
class Signature:
    id: str
    cause: str
    patterns: tuple[str, ...]
    meaning: str
    action: str
    restart: bool
    exit_class: int | None  # the runtime exit class this failure maps to (exitcodes.py), if any
    rank: int  # lower: closer to the root cause
    severity: str = "error"  # "error": the job failed of it; "warning": worth knowing, not a failure
    sources: tuple[str, ...] = ()
    regexes: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regexes", tuple(re.compile(p) for p in self.patterns))

    def match(self, line: str) -> bool:
        return any(r.search(line) for r in self.regexes)


# Ranks: 0 hardware, 10 environment/configuration, 20 memory, 30 operator,
# 40 numerics, 50 hang, 60 rendezvous, 70 collective timeouts (usually a consequence),
# 90 warnings.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        id="hbm-ecc",
        cause="uncorrectable device memory error (HBM multi-bit ECC / UCE)",
        patterns=(r"HBM MULTI BIT ECC ERROR", r"\bUCE ERROR\b", r"SUSPECT MEM ERROR",
                  r"error code is 50705[34]\b", r"(?i)multi[- ]bit ecc"),
        meaning="The NPU's memory returned data it could not correct. The step's results are "
                "unreliable and this device (or node) is faulty; the other ranks then time out "
                "in their next collective.",
        action="Restart the job from the last checkpoint on another node (drain this node from "
               "the scheduler) and report the node and device to the cluster operator; "
               "`npu-smi info -t health -i <card>` shows the device's health.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=0,
        sources=(("torch_npu csrc/core/npu/NPUQueue.cpp deviceErrorMap (UCE ERROR, HBM MULTI BIT ECC ERROR, "
                  "SUSPECT MEM ERROR); ACL runtime codes 507053/507054"),),
    ),
    Signature(
        id="device-link-lost",
        cause="a device or its link was lost (HCCS link error, device heartbeat lost, device dropped)",
        patterns=(r"HCCS LINK ERROR", r"(?i)device\s*(?:\d+\s*)?(?:heartbeat|heart beat)\s*(?:is\s*)?lost",
                  r"(?i)\bdevice\s+(?:is\s+)?(?:lost|offline|not\s+found)\b", r"(?i)\blink\s+(?:is\s+)?down\b",
                  r"error code is 507033\b"),
        meaning="An NPU or its interconnect stopped answering. Work on it is lost, and collectives "
                "that include it cannot complete.",
        action="Restart from the last checkpoint on another node (drain this one); check the card with "
               "`npu-smi info` and the links with `hccn_tool -i <card> -link -g` and "
               "`hccn_tool -i <card> -net_health -g`.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=1,
        sources=("torch_npu deviceErrorMap (HCCS LINK ERROR); Ascend hccn_tool documentation",),
    ),
    Signature(
        id="remote-rank-failed",
        cause="a remote rank failed (HCCL op retry failed / suspect remote error)",
        patterns=(r"SUSPECT REMOTE ERROR", r"HCCL OP RETRY FAILED", r"(?i)error cqe"),
        meaning="HCCL gave up on a peer: the network or the peer's device failed during a collective.",
        action="Read the failing peer's log first (its error is the root cause); check the network "
               "with `hccn_tool -i <card> -net_health -g` on both nodes; restart from the last checkpoint.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=2,
        sources=("torch_npu ProcessGroupHCCL get_device_error(); HCCL EI0002 solution text (error cqe)",),
    ),
    Signature(
        id="cann-not-set",
        cause="the CANN environment is not set (libhccl / libascendcl not found)",
        patterns=(r"lib(?:hccl|ascendcl|acl_op_compiler|ge_runner|runtime)\.so[^:]*: cannot open shared object file",
                  r"(?i)ASCEND_(?:HOME|TOOLKIT_HOME|OPP)_PATH.*(?:not set|is empty)"),
        meaning="torch_npu cannot load CANN's libraries: the launcher did not source CANN's set_env.sh.",
        action="Source CANN's environment before Python starts: "
               "`source /usr/local/Ascend/ascend-toolkit/set_env.sh` (or `$ASCEND_TOOLKIT_HOME/set_env.sh`); "
               "the launchers that `npu-migrate launch` writes do it. A restart as it is fails the same way.",
        restart=False, exit_class=exitcodes.FATAL, rank=10,
        sources=("CANN installation guide (set_env.sh); torch_npu import errors in public issue trackers",),
    ),
    Signature(
        id="nccl-backend",
        cause="the process group asks for NCCL, which torch_npu does not have",
        patterns=(r"Distributed package doesn't have NCCL built in",
                  r"(?i)ProcessGroupNCCL is only supported with GPUs",
                  r"(?i)Invalid backend: 'nccl'"),
        meaning="The code (or a config/launcher flag) still passes backend='nccl'; on Ascend the backend is 'hccl'.",
        action="Change the backend to 'hccl' (`init_process_group(backend='hccl')`, or the flag/config value); "
               "`npu-migrate <repo> --write` rewrites it (NPU201, NPU803, NPU831). A restart as it is fails the same way.",
        restart=False, exit_class=exitcodes.FATAL, rank=11,
        sources=("torch.distributed error text; npu-migrate rules NPU201/NPU803/NPU831",),
    ),
    Signature(
        id="version-mismatch",
        cause="torch, torch_npu and CANN versions do not pair",
        patterns=(r"(?i)torch_npu.*(?:requires|is not compatible with|does not match).*torch",
                  r"(?i)undefined symbol.*(?:torch_npu|c10_npu|libtorch)",
                  r"(?i)Driver Version: .* is invalid or not supported"),
        meaning="torch_npu X.Y is built for torch X.Y and a CANN release; a mismatch fails at import or at the first op.",
        action="Install the torch_npu release paired with the installed torch (same X.Y) and the CANN version its "
               "release notes name; `npu-migrate preflight` prints the versions it finds.",
        restart=False, exit_class=exitcodes.FATAL, rank=12,
        sources=("torch_npu release notes (torch X.Y pairs with torch_npu X.Y)",),
    ),
    Signature(
        id="npu-oom",
        cause="NPU out of memory",
        patterns=(r"NPU out of memory", r"(?i)OutOfMemoryError: NPU",
                  r"(?i)ERR0?2002\b.*memory", r"(?i)EL0004.*(?:alloc|memory)", r"(?i)Failed to allocate memory"),
        meaning="A tensor allocation did not fit in the device's memory; restarting as it is hits the same limit.",
        action="Reduce the per-device batch size or sequence length, enable activation checkpointing, or shard "
               "optimizer state (FSDP/ZeRO); set `PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` against "
               "fragmentation (not together with max_split_size_mb). A restart as it is fails the same way.",
        restart=False, exit_class=exitcodes.FATAL, rank=20,
        sources=(("torch_npu OOM message ('NPU out of memory. Tried to allocate ...'); "
                  "PYTORCH_NPU_ALLOC_CONF in the torch_npu documentation"),),
    ),
    Signature(
        id="aicore-exception",
        cause="an operator failed on the device (AI Core / vector core / AI CPU exception)",
        patterns=(r"(?i)there is an? (?:aicore|aivec|aicpu|fftsplus aicore) error",
                  r"(?i)\[(?:aicore|aicpu|aivec) exception\]", r"(?i)The (?:aicore|vector core) execution is abnormal",
                  r"(?i)Aicpu kernel execute failed", r"EZ9999:? .*(?:aicore|aicpu|Kernel task happen error)"),
        meaning="A device kernel raised an exception: usually an operator's input (shape, dtype, out-of-range index) "
                "or an operator bug, which a restart repeats.",
        action="Re-run with `ASCEND_LAUNCH_BLOCKING=1` to find the operator in the Python traceback, check its "
               "inputs (indices in range, supported dtype), and look up the op in the CANN operator list; "
               "report it with the plog (`~/ascend/log/debug/plog`).",
        restart=False, exit_class=exitcodes.FATAL, rank=30,
        sources=("CANN EZ9999 messages in public issue trackers (Ascend/pytorch, LLaMA-Factory)",),
    ),
    Signature(
        id="nan-loss",
        cause="the loss became NaN or Inf",
        patterns=(r'"event":\s*"(?:nan|inf)_loss"', r"(?i)\bloss[\"']?\s*[:=]\s*[\"']?(?:nan|-?inf)\b",
                  r"(?i)npu_runtime health: (?:nan|inf) loss"),
        meaning="Training diverged (learning rate, fp16 overflow without loss scaling, bad data) or a device "
                "computed garbage. Steps after it train on garbage.",
        action="Resume from the last good checkpoint; if it recurs at the same step, lower the learning rate, use "
               "bf16 or a GradScaler with fp16, and check that batch's data. `NPU_RUNTIME_HEALTH_ACTION=stop` "
               "ends the rank on the first NaN (exit 76) so the launcher restarts from the last good checkpoint.",
        restart=True, exit_class=exitcodes.HEALTH, rank=40,
        sources=("Ascend distributed-training reliability guide (loss NaN monitoring)",),
    ),
    Signature(
        id="watchdog-hang",
        cause="a rank hung (the npu_runtime watchdog saw no sign of life)",
        patterns=(r"npu_runtime watchdog: .*(?:no sign of life|exiting with code 75)",
                  r"(?i)Watchdog caught collective operation timeout"),
        meaning="A rank made no progress for the watchdog's timeout: a collective that never completed, a "
                "deadlock, or a stalled data loader. The stack dump next to the message says where.",
        action="Read the dumped stacks (which call every thread was in); restart from the last checkpoint; if it "
               "recurs in a collective, read the other ranks' logs for their first error.",
        restart=True, exit_class=exitcodes.HANG, rank=50,
        sources=("npu_runtime watchdog message; torch ProcessGroup watchdog message",),
    ),
    Signature(
        id="rendezvous",
        cause="the rendezvous with the master failed (TCPStore / MASTER_ADDR unreachable)",
        patterns=(r"(?i)DistNetworkError", r"(?i)store->get\(.*\) got error: Socket Timeout",
                  r"(?i)(?:failed to|cannot) connect to (?:the )?(?:server|master|TCPStore)",
                  r"(?i)The client socket has timed out after"),
        meaning="A rank could not reach MASTER_ADDR:MASTER_PORT in time: the master started late, the address "
                "or port is wrong, or a firewall blocks it.",
        action="Check MASTER_ADDR/MASTER_PORT on every node (`npu-migrate preflight --master ADDR:PORT`), that "
               "the port is open, and that node 0 started; a restart helps when the master was only late.",
        restart=True, exit_class=None, rank=60,
        sources=("torch.distributed TCPStore errors",),
    ),
    Signature(
        id="hccl-connect-timeout",
        cause="HCCL could not connect to a peer in time (EI0006, socket timeout)",
        patterns=(r"\bEI0006\b", r"(?i)Getting socket times out",
                  r"(?i)wait socket establish timeout", r"Communication_Error_Get_Socket"),
        meaning="Building the communicator timed out (HCCL_CONNECT_TIMEOUT, 120 s by default): a peer started "
                "late or died first, or the device network (RoCE) between nodes is down.",
        action="Read the other ranks' logs for an earlier error; check device IPs and links "
               "(`hccn_tool -i <card> -ip -g`, `-net_health -g`); raise `HCCL_CONNECT_TIMEOUT` (up to 7200; "
               "1800 is common for large jobs) when ranks start at different times.",
        restart=True, exit_class=None, rank=70,
        sources=("HCCL EI0006 message and solution text; LLaMA-Factory / ms-swift NPU docs (HCCL_CONNECT_TIMEOUT=1800)",),
    ),
    Signature(
        id="hccl-exec-timeout",
        cause="a collective did not complete in time (EI0002, notify wait timeout)",
        patterns=(r"\bEI0002\b", r"(?i)wait execution of the Notify register times out",
                  r"(?i)hccl fftsplus task timeout", r"(?i)stuck notify"),
        meaning="A collective waited longer than HCCL_EXEC_TIMEOUT (1836 s by default): usually another rank "
                "failed or is stuck (look for its first error), sometimes one rank is much slower (an evaluation "
                "or a save on rank 0 only) or ranks disagree on the number of steps.",
        action="Read the other ranks' logs for their first error; if one rank does extra work between "
               "collectives, raise `HCCL_EXEC_TIMEOUT` (a multiple of 68 on Atlas training series) or move that "
               "work; check that every rank gets the same number of batches.",
        restart=True, exit_class=None, rank=71,
        sources=("HCCL EI0002 message and solution text in public issue trackers (vllm-ascend, lmdeploy)",),
    ),
    Signature(
        id="cpu-fallback",
        cause="an operator is not supported on the NPU and runs on the CPU",
        patterns=(r"is not currently supported on the NPU backend and will fall back to run on the CPU",),
        meaning="torch_npu copies the operator's inputs to the CPU and back: correct but slow, and a frequent "
                "cause of low NPU utilisation.",
        action="Find the operator named in the warning; replace it with a supported equivalent or move it out of "
               "the training step; check whether a newer torch_npu supports it.",
        restart=False, exit_class=None, rank=90, severity="warning",
        sources=("torch_npu VariableFallbackKernel warning text",),
    ),
)


def by_id(signature_id: str) -> Signature:
    for signature in SIGNATURES:
        if signature.id == signature_id:
            return signature
    raise KeyError(signature_id)
