"""The launch plan: what to start, where, and on how many NPUs.

Values come from ``[tool.npu-migrate.launch]`` (keys below, kebab-case as the rest of
``[tool.npu-migrate]``), and command-line flags replace them one by one:

    [tool.npu-migrate.launch]
    entry = "train.py"                 # the migrated entry script, relative to the project root
    args = ["--epochs", "10"]          # its arguments
    nodes = 2                          # servers
    cards = 8                          # NPUs per server: 1, 2, 4 or 8 (16 on 16-NPU servers)
    targets = ["torchrun", "volcano"]  # what to generate (default: torchrun); also ascendjob, ...
    out = "launch"                     # where, relative to the project root
    image = "registry.example.com/team/train:1.0"   # the training image (volcano)
    job-name = "resnet"                # Volcano Job name (default: the project directory's name)
    namespace = "default"
    queue = "default"
    accelerator = "ascend-910b"        # ring-controller.atlas label value
    npu-resource = "huawei.com/Ascend910"           # the device plugin's resource name
    accelerator-type = "module-910b-8"  # the nodeSelector's accelerator-type (default: from cards)
    host-arch = "huawei-arm"           # the nodeSelector's host-arch (huawei-arm or huawei-x86;
                                       # default huawei-x86 for module-910b-16, an x86-hosted box)
    driver-mounts = false              # mount the host's driver and npu-smi (no Ascend Docker Runtime)
    max-restarts = 3                   # restarts after a restartable failure (exit classes 75-77)
    workdir = "/workspace"             # the project root inside the image
    master-port = 29500
    python = "python3"                 # the interpreter that has torch and torch_npu
    env = { HCCL_BUFFSIZE = "200" }    # extra variables the launchers export (overridable)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

TARGETS = ("torchrun", "torch-npu-run", "ranktable", "modelarts", "volcano", "ascendjob")
# Every target that needs another one's file to run: the Volcano pods run the torchrun
# launcher, the AscendJob pods the per-card ranktable launcher.
REQUIRES = {"volcano": ("torchrun",), "ascendjob": ("ranktable",)}
# NPUs per server that Ascend training servers have and HCCL supports: the Atlas training
# series and Atlas A2 run 1, 2, 4 or 8 per server (cards 0-3 and 4-7 form separate meshes);
# 16-NPU servers (Atlas 200T A2 Box16, Atlas A3 servers with 16 NPU dies) also 16. The
# preflight applies the same rule.
CARDS_PER_NODE = (1, 2, 4, 8, 16)
CARDS_RULE = "an Ascend training server runs 1, 2, 4 or 8 NPUs (16 on a 16-NPU server: Atlas 200T A2 Box16, Atlas A3)"
# The most NPUs a server carrying the device plugin's accelerator-type label has
# (MindCluster's job YAML reference: module = Atlas 800 training server, half = its half
# configuration, module-910b-8 = Atlas 800T A2, module-910b-16 = Atlas 200T A2 Box16,
# card-910b-2 = a server with Atlas 300T A2 cards, module-a3-16 / module-a3-16-super-pod =
# Atlas A3 servers and SuperPoD). A pod asking more never fits such a node: it stays Pending.
SERVER_NPUS = {"module": 8, "half": 4, "module-910b-8": 8, "module-910b-16": 16, "card-910b-2": 2,
               "module-a3-16": 16, "module-a3-16-super-pod": 16}
# Volcano's Ascend plugin (ascend-for-volcano, module910x8 / half910x4
# checkModuleDistributeTrainMode) gives a job of several pods on Atlas 800 training servers
# whole servers only: every pod must ask for all of the server's NPUs. Some releases apply
# the same rule to the 910B handlers; there it is a warning (command.py).
WHOLE_SERVER_TYPES = ("module", "half")
# Server types whose host CPU is fixed: the Atlas 200T A2 Box16 is an "A+X" box (x86 host);
# Volcano's Ascend plugin (module910bx16 checkJobArch) took only host-arch huawei-x86 for it.
HOST_ARCH_OF_TYPE = {"module-910b-16": "huawei-x86"}
SCHEDULED_TARGETS = ("volcano", "ascendjob")
MAX_NODES = 4096
HOST_ARCHS = ("huawei-arm", "huawei-x86")
# Characters no name may carry: they end a comment line in a launcher (\n), a YAML
# scalar or line (\r, NEL, LS, PS), or hide what a line says (other controls).
_UNSAFE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cs")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# Volcano names pods <job>-<task>-<index>; they must stay valid 63-character names.
_POD_SUFFIX = len("-worker-") + 5


class PlanError(ValueError):
    """A launch setting is missing or invalid; the message names the key or flag."""


@dataclass(frozen=True)
class LaunchPlan:
    root: Path  # the project root (absolute)
    entry: str  # POSIX path relative to root
    args: tuple[str, ...] = ()
    nodes: int = 1
    cards: int = 8
    targets: tuple[str, ...] = ("torchrun",)
    out: str = "launch"  # POSIX path relative to root
    image: str | None = None
    job_name: str = "train"
    namespace: str = "default"
    queue: str = "default"
    accelerator: str = "ascend-910b"
    npu_resource: str = "huawei.com/Ascend910"
    accelerator_type: str = "module-910b-8"
    host_arch: str = "huawei-arm"
    driver_mounts: bool = False
    max_restarts: int = 3
    workdir: str = "/workspace"
    master_port: int = 29500
    python: str = "python3"
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # From the entry script's init_process_group(timeout=...), when it says: (seconds, "file:line").
    pg_timeout: tuple[float, str] | None = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.cards

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    def out_path(self, name: str) -> str:
        """A generated file's path relative to the root."""
        return str(PurePosixPath(self.out) / name)

    @property
    def root_from_out(self) -> str:
        """The project root as seen from the output directory (for ``cd`` in launchers)."""
        depth = len(PurePosixPath(self.out).parts)
        return "/".join([".."] * depth) or "."


KEYS = {
    "entry", "args", "nodes", "cards", "targets", "out", "image", "job-name", "namespace", "queue",
    "accelerator", "npu-resource", "workdir", "master-port", "python", "env", "accelerator-type", "host-arch",
    "driver-mounts", "max-restarts",
}


def _where(key: str, origin: dict[str, str]) -> str:
    return origin.get(key, f"[tool.npu-migrate.launch] {key}")


def _int(value, key: str, origin: dict[str, str], low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{_where(key, origin)} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise PlanError(f"{_where(key, origin)} must be between {low} and {high}, got {value}")
    return value


def _str(value, key: str, origin: dict[str, str]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PlanError(f"{_where(key, origin)} must be a non-empty string, got {value!r}")
    return _safe(value, key, origin)


def unsafe_char(text: str) -> str | None:
    """The first character of ``text`` that no generated file may carry, or None."""
    import unicodedata

    return next((c for c in text if unicodedata.category(c) in _UNSAFE_CATEGORIES), None)


def _safe(value: str, key: str, origin: dict[str, str]) -> str:
    """Names are data, but a newline or control character in one would end a comment
    line of a launcher (the rest would run) or a YAML line: refuse them."""
    bad = unsafe_char(value)
    if bad is not None:
        raise PlanError(f"{_where(key, origin)}={value!r} contains the control character {bad!r}, "
                        "which no launcher or job spec may carry")
    return value


def _relative(value: str, key: str, origin: dict[str, str], root: Path) -> str:
    """The path as POSIX relative to the root: a flag's path is relative to the current
    directory, a configured one to the root."""
    path = Path(value)
    if not path.is_absolute():
        path = (Path.cwd() if key in origin else root) / path
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        raise PlanError(f"{_where(key, origin)}={value!r} is outside the project root {root}") from None
    return rel.as_posix()


def build_plan(table: dict, flags: dict, root: Path) -> LaunchPlan:
    """Merge ``[tool.npu-migrate.launch]`` (``table``) with command-line ``flags`` (same
    keys; a flag's value wins) and validate. Flag paths are relative to the current
    directory, configured paths to the project root."""
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise PlanError(f"unknown key(s) in [tool.npu-migrate.launch]: {', '.join(unknown)}")
    given = {k: v for k, v in flags.items() if v is not None}
    origin = {key: "ENTRY" if key == "entry" else f"--{key}" for key in given}
    merged = {**table, **given}
    if "entry" not in merged:
        raise PlanError("no entry script: pass ENTRY (npu-migrate launch train.py) or set entry in "
                        "[tool.npu-migrate.launch]")
    root = root.absolute()
    entry = _safe(_relative(_str(merged["entry"], "entry", origin), "entry", origin, root), "entry", origin)
    if not (root / entry).is_file():
        raise PlanError(f"{_where('entry', origin)}: no such file: {root / entry}")
    args = merged.get("args", [])
    if not isinstance(args, (list, tuple)) or not all(isinstance(a, str) for a in args):
        raise PlanError(f"{_where('args', origin)} must be a list of strings")
    targets = merged.get("targets", ["torchrun"])
    if isinstance(targets, str) or not isinstance(targets, (list, tuple)) or not targets:
        raise PlanError(f"{_where('targets', origin)} must be a non-empty list of: {', '.join(TARGETS)}")
    for target in targets:
        if target not in TARGETS:
            raise PlanError(f"{_where('targets', origin)}: unknown target {target!r} (choose from {', '.join(TARGETS)})")
    wanted = [t for t in TARGETS if t in targets or any(t in REQUIRES.get(x, ()) for x in targets)]
    cards = merged.get("cards", 8)
    if isinstance(cards, bool) or not isinstance(cards, int):
        raise PlanError(f"{_where('cards', origin)} must be an integer, got {cards!r}")
    if cards not in CARDS_PER_NODE:
        raise PlanError(f"{_where('cards', origin)}={cards}: {CARDS_RULE}")
    env = merged.get("env", {})
    if not isinstance(env, dict):
        raise PlanError(f"{_where('env', origin)} must be a table of NAME = \"value\"")
    for name, value in env.items():
        if not _ENV_NAME.match(name) or not isinstance(value, str):
            raise PlanError(f"{_where('env', origin)}: {name!r} must be a variable name with a string value")
        _safe(value, "env", origin)
        if name.startswith("MA_"):
            raise PlanError(f"{_where('env', origin)}: {name} starts with MA_, which ModelArts reserves for itself")
    out = _safe(_relative(_str(merged.get("out", "launch"), "out", origin), "out", origin, root), "out", origin)
    if out in ("", "."):
        raise PlanError(f"{_where('out', origin)} must be a directory below the project root, not the root")
    job_name = _str(merged.get("job-name") or _job_name(root), "job-name", origin)
    if not _DNS_LABEL.match(job_name) or len(job_name) + _POD_SUFFIX > 63:
        raise PlanError(f"{_where('job-name', origin)}={job_name!r} must be a lowercase DNS label "
                        f"(a-z, 0-9, '-') of at most {63 - _POD_SUFFIX} characters")
    for key in ("namespace", "queue", "accelerator"):
        value = _str(merged.get(key, getattr(LaunchPlan, key.replace("-", "_"))), key, origin)
        if not _DNS_LABEL.match(value):
            raise PlanError(f"{_where(key, origin)}={value!r} must be a lowercase DNS label")
    accelerator = merged.get("accelerator", LaunchPlan.accelerator)
    resource = _str(merged.get("npu-resource", LaunchPlan.npu_resource), "npu-resource", origin)
    if not _RESOURCE.match(resource):
        raise PlanError(f"{_where('npu-resource', origin)}={resource!r} is not a resource name (vendor/name)")
    image = merged.get("image")
    if image is not None:
        image = _str(image, "image", origin)
    for needs_image in ("volcano", "ascendjob"):
        if needs_image in wanted and image is None:
            raise PlanError(f"the {needs_image} target needs the training image: --image or image = \"...\" in "
                            "[tool.npu-migrate.launch]")
    workdir = _str(merged.get("workdir", LaunchPlan.workdir), "workdir", origin)
    if not workdir.startswith("/"):
        raise PlanError(f"{_where('workdir', origin)}={workdir!r} must be an absolute path inside the image")
    if "modelarts" in wanted:  # its boot command names the project directory
        _safe(root.name, "project directory", {"project directory": f"the project directory {root}"})
    accelerator_type = _str(merged.get("accelerator-type") or _accelerator_type(accelerator, cards),
                            "accelerator-type", origin)
    if not _LABEL_VALUE.match(accelerator_type):
        raise PlanError(f"{_where('accelerator-type', origin)}={accelerator_type!r} is not a label value")
    if cards > SERVER_NPUS.get(accelerator_type, cards):
        chosen = (f"{_where('accelerator-type', origin)}={accelerator_type}" if "accelerator-type" in merged
                  else f"accelerator-type {accelerator_type} (from {_where('accelerator', origin)}={accelerator})")
        bigger = sorted(t for t, n in SERVER_NPUS.items() if n >= cards)
        raise PlanError(f"{_where('cards', origin)}={cards}: {chosen} servers have {SERVER_NPUS[accelerator_type]} "
                        f"NPUs (a pod asking more is never scheduled); ask for at most "
                        f"{SERVER_NPUS[accelerator_type]}, "
                        f"or choose servers with {cards}: --accelerator-type {' or '.join(bigger)}")
    nodes = _int(merged.get("nodes", 1), "nodes", origin, 1, MAX_NODES)
    scheduled = [t for t in SCHEDULED_TARGETS if t in wanted]
    if scheduled and nodes > 1 and accelerator_type in WHOLE_SERVER_TYPES and cards != SERVER_NPUS[accelerator_type]:
        whole = SERVER_NPUS[accelerator_type]
        raise PlanError(f"{_where('cards', origin)}={cards} on {nodes} nodes: Volcano's Ascend plugin schedules a "
                        f"multi-node {scheduled[0]} job on {accelerator_type} servers (Atlas 800 training) only when "
                        f"every pod asks for the whole server's {whole} NPUs; use --cards {whole}, or one node")
    server_npus = SERVER_NPUS.get(accelerator_type)
    if "ascendjob" in wanted and server_npus is not None and cards < server_npus:
        raise PlanError(f"{_where('cards', origin)}={cards}: the ascendjob target takes whole servers ({server_npus} "
                        f"NPUs on {accelerator_type}): the operator's ranktable names each NPU by its id on the host "
                        f"(4-7 for a pod given the second half of a server), which the per-card launcher's cards "
                        f"0..{cards - 1} inside the pod do not match; use --cards {server_npus}, or the volcano target")
    fixed_arch = HOST_ARCH_OF_TYPE.get(accelerator_type)
    host_arch = _str(merged.get("host-arch", fixed_arch or LaunchPlan.host_arch), "host-arch", origin)
    if host_arch not in HOST_ARCHS:
        raise PlanError(f"{_where('host-arch', origin)}={host_arch!r}: the device plugin labels nodes "
                        f"{' or '.join(HOST_ARCHS)}")
    if fixed_arch and host_arch != fixed_arch:
        raise PlanError(f"{_where('host-arch', origin)}={host_arch}: {accelerator_type} servers (Atlas 200T A2 Box16) "
                        f"have x86 hosts, labelled host-arch {fixed_arch}; no node would match")
    driver_mounts = merged.get("driver-mounts", False)
    if not isinstance(driver_mounts, bool):
        raise PlanError(f"{_where('driver-mounts', origin)} must be true or false")
    from .entry_timeout import init_timeout

    return LaunchPlan(
        root=root,
        entry=entry,
        args=tuple(args),
        nodes=nodes,
        cards=cards,
        targets=tuple(wanted),
        out=out,
        image=image,
        job_name=job_name,
        namespace=merged.get("namespace", LaunchPlan.namespace),
        queue=merged.get("queue", LaunchPlan.queue),
        accelerator=accelerator,
        npu_resource=resource,
        workdir=workdir.rstrip("/") or "/",
        master_port=_int(merged.get("master-port", LaunchPlan.master_port), "master-port", origin, 1, 65535),
        python=_str(merged.get("python", LaunchPlan.python), "python", origin),
        env=tuple(sorted(env.items())),
        accelerator_type=accelerator_type,
        host_arch=host_arch,
        driver_mounts=driver_mounts,
        max_restarts=_int(merged.get("max-restarts", LaunchPlan.max_restarts), "max-restarts", origin, 0, 100),
        pg_timeout=init_timeout(root / entry, entry),
    )


def _accelerator_type(accelerator: str, cards: int) -> str:
    """The device plugin's ``accelerator-type`` node label for a server that fits the job:
    an 8-NPU Atlas A2 module server (``module-910b-8``), the 16-NPU Atlas 200T A2 Box16
    (``module-910b-16``), or an Atlas 800 training server (``module``, for ``ascend-910``).
    Atlas A3 servers carry ``module-a3-16`` (``module-a3-16-super-pod`` in a SuperPoD):
    ``--accelerator-type`` names them."""
    if accelerator == "ascend-910":
        return "module"
    return "module-910b-16" if cards > 8 else "module-910b-8"


def _job_name(root: Path) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", root.name.lower()).strip("-")[: 63 - _POD_SUFFIX].strip("-")
    return name or "train"
