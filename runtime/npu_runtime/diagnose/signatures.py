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
    # Per regex: what searches a line for it in linear time (``Sequence``, or the regex itself).
    matchers: tuple[re.Pattern[str] | Sequence, ...] = field(init=False, repr=False, compare=False)
    # Per regex: a literal every match contains (lowered when the regex ignores case), or None.
    literals: tuple[tuple[str, bool] | None, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regexes", tuple(re.compile(p) for p in self.patterns))
        object.__setattr__(self, "literals", tuple(required_literal(r) for r in self.regexes))
        object.__setattr__(self, "matchers", tuple(linear_matcher(r) for r in self.regexes))

    def match(self, line: str, lowered: str | None = None) -> bool:
        """Whether a pattern matches ``line`` (``lowered``: ``line.lower()``, if the caller has it).
        A regex runs only on lines that hold its required literal: a substring test is
        a hundred times cheaper than a regex search, and almost every log line is noise."""
        for regex, literal in zip(self.matchers, self.literals):
            if literal is not None:
                text, ignore_case = literal
                if ignore_case:
                    if lowered is None:
                        lowered = line.lower()
                    if text not in lowered:
                        continue
                elif text not in line:
                    continue
            if regex.search(line):
                return True
        return False


class Sequence:
    """``A.*B.*C`` matched as "A, then B after it, then C after that": each part is
    searched once from where the previous one ended, so a line costs one pass per part.
    Python's backtracking engine takes ``A.*B.*C`` in time quadratic (or worse) in the
    line's length when A and B repeat without a C (a 60 KB line of ``torch_npu
    requires`` took 3 s). Same answer as the regex for parts that are plain words and
    alternations of them, which is all the signature table uses."""

    def __init__(self, parts: list[re.Pattern[str]]):
        self.parts = parts

    def search(self, line: str) -> bool:
        pos = 0
        for part in self.parts:
            found = part.search(line, pos)
            if found is None:
                return False
            pos = found.end()
        return True


def _split_on_dot_star(pattern: str) -> list[str]:
    """``pattern`` cut at each top-level ``.*`` (outside groups and classes)."""
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and pattern.startswith(".*", i):
            parts.append(pattern[start:i])
            i += 2
            if pattern[i:i + 1] in ("?", "+"):
                i += 1
            start = i
            continue
        i += 1
    parts.append(pattern[start:])
    return parts


def linear_matcher(regex: re.Pattern[str]) -> re.Pattern[str] | Sequence:
    """A ``Sequence`` for a pattern with a top-level ``.*``, else the regex."""
    parts = _split_on_dot_star(regex.pattern)
    if len(parts) < 2:
        return regex
    flags = regex.flags
    compiled = []
    for part in parts:
        part = part.removeprefix("(?i)")
        if part.startswith("^"):
            return regex  # an anchored later part would not mean the same
        compiled.append(re.compile(part, flags) if part else None)
    return Sequence([c for c in compiled if c is not None])


def required_literal(regex: re.Pattern[str]) -> tuple[str, bool] | None:
    """The longest run of literal characters at the top level of ``regex`` (so in every
    match), with whether it ignores case; None when there is none of 3 characters or more,
    or the pattern cannot be read (then the regex always runs)."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # Python 3.11+
    except ImportError:  # Python 3.10
        import sre_parse as parser  # type: ignore[no-redef]
    try:
        parsed = parser.parse(regex.pattern, regex.flags)
        literal_op = parser.LITERAL if hasattr(parser, "LITERAL") else None
        if literal_op is None:
            from re import _constants as constants  # type: ignore[attr-defined]

            literal_op = constants.LITERAL
        best, run = "", ""
        for op, value in parsed:
            if op == literal_op:
                run += chr(value)
                best = max(best, run, key=len)
            else:
                run = ""
    except Exception:  # noqa: BLE001 - no prefilter: correct, only slower
        return None
    if len(best) < 3:
        return None
    ignore_case = bool(regex.flags & re.IGNORECASE)
    return (best.lower() if ignore_case else best), ignore_case


#: A device named in a driver or runtime line, with its number if any: "device 3",
#: "device[3]", "device(3)", "davinci2", "dev_id 3", "NPU id: 3". Written so that no two
#: parts can take the same blanks (no backtracking over a long run of them).
_DEVICE = (r"\b(?:device|npu|card|chip|davinci|dev(?=[ _]?id))(?:[ _]?id)?"
           r"(?:\s*[\[(]\s*\d+\s*[\])]|\s*[:=]\s*\d+|\s+\d+|\d+)?")
#: "loss", "train_loss", "lm loss", not "best_loss" / "min loss" (a best-so-far that starts at inf)
_LOSS = r"(?<![a-z0-9])(?<!best[ _])(?<!min[ _])(?<!lowest[ _])loss"
#: nan / inf as printed: "nan", "-nan", "inf", "Infinity", "tensor(nan, ...)"
_NAN_VALUE = r"(?:tensor\(\s*)?[-+]?(?:nan|inf(?:inite|inity)?)\b"

# Ranks: 0 hardware, 10 environment/configuration, 20 memory, 30 operator,
# 40 numerics, 50 hang, 60 rendezvous, 70 collective timeouts (usually a consequence),
# 90 warnings.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        id="hbm-ecc",
        cause="uncorrectable device memory error (HBM multi-bit ECC / UCE)",
        patterns=(r"HBM MULTI BIT ECC ERROR", r"\bUCE ERROR\b", r"SUSPECT MEM ERROR", r"DEVICE MEM ERROR",
                  r"reason=\[device mem error\]", r"error code(?: is |:\s*)50705[345]\b",
                  # not "multi-bit ECC errors: 0" (a health check's count)
                  r"(?i)multi[- ]bit ecc error(?!s?\s*(?:count\s*)?[:=]\s*0\b)"),
        meaning="The NPU's memory returned data it could not correct. The step's results are "
                "unreliable and this device (or node) is faulty; the other ranks then time out "
                "in their next collective.",
        action="Restart the job from the last checkpoint on another node (drain this node from "
               "the scheduler) and report the node and device to the cluster operator; "
               "`npu-smi info -t health -i <card>` shows the device's health.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=0,
        sources=(("torch_npu csrc/core/npu/NPUQueue.cpp deviceErrorMap (UCE ERROR, HBM MULTI BIT ECC ERROR, "
                  "SUSPECT MEM ERROR, reason=[device mem error]); ACL runtime codes 507053/507054/507055"),),
    ),
    Signature(
        id="device-link-lost",
        cause="a device or its link was lost (HCCS link error, device heartbeat lost, device dropped)",
        patterns=(r"HCCS LINK ERROR", r"(?i)device\s*(?:\d+\s*)?(?:heartbeat|heart beat)\s*(?:is\s*)?lost",
                  r"(?i)task scheduler loses the heartbeat", r"error code(?: is |:\s*)507010\b",
                  r"(?i)\blink\s+(?:is\s+)?down\b",
                  r"(?i)\blink status\s*:\s*down\b",
                  # CANN's runtime: "Device[1] lost heartbeat.", "..., reason=lost heartbeat"
                  r"(?i)\bdevice\s*(?:\[\s*\d+\s*\]\s*|\d+\s+)?lost (?:the )?heartbeat", r"(?i)reason=lost heartbeat",
                  # lost / offline / removed / disconnected, its heartbeat or its link lost (driver, HCCL
                  # and kernel phrasings: "device(3) is removed", "dev_id 3 heartbeat lost", "the link to
                  # rank 5 was disconnected", pciehp's "Slot(2): Card not present"); NVIDIA's "GPU has
                  # fallen off the bus" (Xid 79) is the same failure on a GPU node
                  *(rf"(?i){_DEVICE}\s+(?:has\s+been\s+|was\s+|is\s+)?{word}\b"
                    for word in ("lost", "offline", "removed", "disconnected")),
                  rf"(?i){_DEVICE}\s+(?:heartbeat|heart beat)\s+(?:has\s+been\s+|was\s+|is\s+)?lost\b",
                  *(r"(?i)\blink\s+(?:(?:to|with)\s+(?:rank|device|npu|peer)\s*\d+\s+|\d+\s+)?"
                    rf"(?:has\s+been\s+|was\s+|is\s+)?{word}\b" for word in ("lost", "broken", "disconnected")),
                  r"(?i)\bSlot\(\d+\): Card not present", r"(?i)\bfallen off the bus\b"),
        meaning="An NPU or its interconnect stopped answering. Work on it is lost, and collectives "
                "that include it cannot complete.",
        action="Restart from the last checkpoint on another node (drain this one); check the card with "
               "`npu-smi info` and the links with `hccn_tool -i <card> -link -g` and "
               "`hccn_tool -i <card> -net_health -g`.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=1,
        sources=("torch_npu deviceErrorMap (HCCS LINK ERROR); torch_npu NPUErrorCodes.h (507010: the task scheduler "
                 "loses the heartbeat); Ascend hccn_tool documentation (link status)",),
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
        patterns=(r"lib(?:hccl|ascendcl|acl_op_compiler|ge_runner|runtime)\.so[^:]{0,64}: cannot open shared object file",
                  r"(?i)ASCEND_(?:HOME|TOOLKIT_HOME|OPP)_PATH.*(?:not set|is empty)"),
        meaning="torch_npu cannot load CANN's libraries: the launcher did not source CANN's set_env.sh.",
        action="Source CANN's environment before Python starts: "
               "`source /usr/local/Ascend/ascend-toolkit/set_env.sh` (or `$ASCEND_TOOLKIT_HOME/set_env.sh`); "
               "the launchers that `npu-migrate launch` writes do it. A restart as it is fails the same way.",
        restart=False, exit_class=exitcodes.FATAL, rank=10,
        sources=("CANN installation guide (set_env.sh); torch_npu import errors in public issue trackers",),
    ),
    Signature(
        id="driver-not-visible",
        cause="the NPU driver is not visible to the process (libascend_hal / libdrvdsmi not found)",
        patterns=(r"lib(?:ascend_hal|drvdsmi_host|dcmi)\.so[^:]{0,64}: cannot open shared object file",),
        meaning="The driver's libraries live on the host (/usr/local/Ascend/driver); a container that does not "
                "mount them, or a LD_LIBRARY_PATH without driver/lib64, cannot reach the NPU.",
        action="Mount the driver into the container (`-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro`, and "
               "the devices /dev/davinci*, /dev/davinci_manager, /dev/hisi_hdc, /dev/devmm_svm) and add "
               "`/usr/local/Ascend/driver/lib64/driver` and `.../lib64/common` to LD_LIBRARY_PATH. A restart as it is "
               "fails the same way.",
        restart=False, exit_class=exitcodes.FATAL, rank=9,
        sources=("Ascend container (docker) guides: driver mounts; libascend_hal import errors in public issue trackers",),
    ),
    Signature(
        id="hccp-busy",
        cause="HCCL could not start its HCCP process (EJ0001: the last training process may still run)",
        patterns=(r"\bEJ0001\b", r"(?i)Failed to initialize the HCCP process"),
        meaning="The device's network process from an earlier run is still alive (a process that did not exit, or "
                "one that was killed less than about 10 s ago), so this run cannot take the device.",
        action="Make sure the previous job's processes are gone (`npu-smi info` lists the processes on each device; "
               "kill the leftovers), wait about 10 s, then restart; a restart after that helps.",
        restart=True, exit_class=None, rank=13,
        sources=("HCCL EJ0001 message and solution text (LLaMA-Factory issue tracker)",),
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
                  r"(?i)Aicpu kernel execute failed", r"EZ9999:? .*(?:aicore|aicpu|Kernel task happen error)",
                  r"error code(?: is |:\s*)50701[4-8]\b", r"error code(?: is |:\s*)5070(?:3[4-6]|4[2-5])\b"),
        meaning="A device kernel raised an exception: usually an operator's input (shape, dtype, out-of-range index) "
                "or an operator bug, which a restart repeats.",
        action="Re-run with `ASCEND_LAUNCH_BLOCKING=1` to find the operator in the Python traceback, check its "
               "inputs (indices in range, supported dtype), and look up the op in the CANN operator list; "
               "report it with the plog (`~/ascend/log/debug/plog`).",
        restart=False, exit_class=exitcodes.FATAL, rank=30,
        sources=("CANN EZ9999 messages in public issue trackers (Ascend/pytorch, LLaMA-Factory); torch_npu "
                 "NPUErrorCodes.h (507014-507018, 507034-507036, 507042-507045: aicore / aicpu / vector core "
                 "timeouts, exceptions and out-of-bounds traps)",),
    ),
    Signature(
        id="operator-error",
        cause="an operator call failed (aclnn / OPS error: unsupported input, dtype or shape)",
        patterns=(r"call aclnn\w+ failed", r"OPS function error", r"\bERR01\d{3} OPS\b",
                  r"\bE[ZK]1001\b"),
        meaning="torch_npu called a CANN operator that rejected its inputs (a dtype or shape the kernel does not "
                "support, an argument out of range) or failed inside; the same step fails again after a restart.",
        action="Read the EZxxxx / ERRxxxxx lines right after it for the operator's complaint; re-run with "
               "`ASCEND_LAUNCH_BLOCKING=1` to get the Python line; cast the input to a supported dtype or move the "
               "op to the CPU; check the op in the CANN operator list of the installed version (a newer CANN may "
               "support it).",
        restart=False, exit_class=exitcodes.FATAL, rank=31,
        sources=("torch_npu OPS_CHECK_ERROR / 'call aclnnXxx failed' messages (Ascend/pytorch issue tracker)",),
    ),
    Signature(
        id="nan-loss",
        cause="the loss became NaN or Inf",
        patterns=(r'"event":\s*"(?:nan|inf)_loss"',
                  # "'loss': nan", "lm loss: nan", "train_loss=nan", "loss=tensor(nan, device='npu:0')"
                  rf"(?i){_LOSS}[\"']?\s*[:=]\s*[\"']?{_NAN_VALUE}",
                  # free text, as custom loops print it: "step 320 loss nan lr 3.0e-04", "Loss is NaN",
                  # "step 12 loss tensor(nan, device='npu:0')"; not "loss nan check: on" (a setting)
                  rf"(?i){_LOSS}\s+(?:is\s+|was\s+|became\s+)?{_NAN_VALUE}(?![-_ ]?(?:check|guard|count|filter|skip))",
                  r"(?i)npu_runtime health: (?:nan|inf) loss",
                  r"^\s*exitcode\s*:\s*76 \(pid"),  # torchrun's failure summary of a rank the monitor stopped
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
                  r"^\s*exitcode\s*:\s*75 \(pid",  # torchrun's failure summary of a rank the watchdog ended
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
        id="force-stop",
        cause="the device's tasks were aborted (FORCE STOP / device task abort)",
        patterns=(r"NPU function error: FORCE STOP", r"reason=\[device task abort\]",
                  r"error code(?: is |:\s*)107022\b"),
        meaning="Someone stopped this rank's device on purpose: the cluster's fault handling (MindCluster, "
                "step retry) after a fault on another rank or node, or the process's own teardown. It is a "
                "consequence; the cause is in another rank's log.",
        action="Read the other ranks' logs (and the plogs of the node that failed) for the first error; restart "
               "from the last checkpoint once that rank's fault is handled.",
        restart=True, exit_class=None, rank=65,
        sources=("torch_npu CHECK_AND_THROW_FORCE_STOP (ACL_ERROR_RT_DEVICE_TASK_ABORT 107022)",),
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
                  r"(?i)hccl fftsplus (?:task )?timeout", r"(?i)stuck notify"),
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
        id="worker-exit-hardware",
        cause="a worker exited with the runtime's hardware class (77)",
        patterns=(r"^\s*exitcode\s*:\s*77 \(pid",),
        meaning="torchrun's failure summary: the rank's runtime diagnosed a device fault (ECC, a lost device or "
                "link) from the exception that ended it.",
        action="Read that rank's log for the fault; drain the node and restart from the last checkpoint elsewhere.",
        restart=True, exit_class=exitcodes.HARDWARE, rank=3,
        sources=("torch.distributed.elastic ChildFailedError summary; npu_runtime exitcodes/crash_class",),
    ),
    Signature(
        id="worker-exit-fatal",
        cause="a worker exited with the runtime's fatal class (78)",
        patterns=(r"^\s*exitcode\s*:\s*78 \(pid",),
        meaning="torchrun's failure summary: the rank's runtime classified the exception that ended it as one a "
                "restart repeats (out of memory, an operator or configuration error).",
        action="Read that rank's log for the error and fix it before restarting.",
        restart=False, exit_class=exitcodes.FATAL, rank=32,
        sources=("torch.distributed.elastic ChildFailedError summary; npu_runtime exitcodes/crash_class",),
    ),
    Signature(
        id="worker-failed",
        cause="a worker process failed (torchrun's failure summary)",
        patterns=(r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError",),
        meaning="torchrun saw a worker exit with an error; the cause is in that worker's output (the 'Root Cause' "
                "block names its rank, exit code and time) and this log holds no known signature of it.",
        action="Read the root-cause rank's own log (and its plog) for the first error; run diagnose on it.",
        restart=True, exit_class=None, rank=95,
        sources=("torch.distributed.elastic ChildFailedError summary",),
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
