"""Adversarial round 5 (issue 38, held-out pass): fresh attacks on every item of the
issue, each a bounded trial in its own scratch directory under ``/tmp/h5/``.

    python bench/adversarial_round5.py                 # every case, a markdown table
    python bench/adversarial_round5.py -k diagnose     # the cases whose name holds "diagnose"
    python bench/adversarial_round5.py --list

A trial *held* when its outcome is the safe one (what each case checks is in its
docstring); a trial past its time limit, a traceback, a write outside the scratch copy
or the tree, a process or temp directory left behind, is *broke*. Run from the
repository root; the emulator cases need ``npu-migrate emulate``'s build (torch).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = Path("/tmp/h5")
MB = 1 << 20
PY = sys.executable


@dataclass
class Run:
    code: int | None  # None: killed at the limit
    out: str
    seconds: float


def run(cmd: list[str], cwd: Path, limit: float, env: dict | None = None, stdin: bytes | None = None) -> Run:
    """``cmd`` in its own session, killed with its whole group at ``limit``."""
    start = time.monotonic()
    full_env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(stdin, timeout=limit)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    return Run(code, out.decode(errors="replace"), time.monotonic() - start)


def no_traceback(r: Run) -> bool:
    return "Traceback (most recent call last)" not in r.out


def scratch(name: str) -> Path:
    path = BASE / name
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def marked_processes(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def verify_scratch_dirs() -> set[str]:
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    return {p.name for p in tmp.glob("npu-migrate-verify-*")}


CASES: dict[str, Callable[[], tuple[bool, str]]] = {}


def registrar(cases: dict[str, Callable[[], tuple[bool, str]]]):
    """A decorator ``@case("name")`` that records an attack in ``cases`` (each round's own)."""
    def case(name: str):
        def register(fn):
            cases[name] = fn
            return fn
        return register
    return case


case = registrar(CASES)


# -------------------------------------------------------------------- diagnose (items 3, 8)

def _diagnose(path: Path, *flags: str, limit: float = 60) -> Run:
    return run([PY, "-m", "npu_runtime.diagnose", *flags, str(path)], path.parent, limit)


def _literals() -> list[str]:
    sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]
    from npu_runtime.diagnose import SIGNATURES

    return list(dict.fromkeys(lit[0] for s in SIGNATURES for lit in s.literals if lit))


def _fill(path: Path, unit: str, size: int = 50 * MB) -> None:
    data = unit.encode()
    with open(path, "wb") as f:
        f.writelines(data for _ in range(size // len(data)))


@case("diagnose: 50 MB of empty lines")
def diagnose_empty_lines() -> tuple[bool, str]:
    d = scratch("d-empty")
    _fill(d / "x.log", "\n" * 4096)
    r = _diagnose(d / "x.log")
    return r.code == 0 and no_traceback(r), f"exit {r.code} in {r.seconds:.1f}s"


@case("diagnose: 50 MB of short lines, each holding one signature's literal")
def diagnose_literal_lines() -> tuple[bool, str]:
    d = scratch("d-literals")
    unit = "".join(lit + "\n" for lit in _literals())
    _fill(d / "x.log", unit * max(1, 65536 // len(unit)))
    r = _diagnose(d / "x.log")
    return r.code in (0, 1) and no_traceback(r) and r.code is not None, f"exit {r.code} in {r.seconds:.1f}s"


@case("diagnose: 50 MB of 64 KB lines built from every pattern's words")
def diagnose_pattern_words() -> tuple[bool, str]:
    sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]
    from npu_runtime.diagnose import SIGNATURES

    sys.path.insert(0, str(ROOT))
    from tests.diagnose.test_linear import _units

    d = scratch("d-words")
    lines = []
    for s in SIGNATURES:
        for pattern in s.patterns:
            for unit in _units(pattern)[:6]:
                lines.append((unit * (65536 // max(1, len(unit)) + 1))[:65535] + "\n")
    with open(d / "x.log", "w") as f:
        written = 0
        while written < 50 * MB:
            for line in lines:
                f.write(line)
                written += len(line)
                if written >= 50 * MB:
                    break
    r = _diagnose(d / "x.log")
    return r.code is not None and no_traceback(r), f"exit {r.code} in {r.seconds:.1f}s ({len(lines)} shapes)"


@case("diagnose: 50 MB of `link ` / `device ` runs (the slowest literal shapes)")
def diagnose_link_runs() -> tuple[bool, str]:
    d = scratch("d-link")
    _fill(d / "x.log", ("link " * 8000 + "\n" + "device " * 8000 + "\n"))
    r = _diagnose(d / "x.log")
    return r.code is not None and no_traceback(r), f"exit {r.code} in {r.seconds:.1f}s"


@case("diagnose: escape sequences in evidence and names, text and json, gzip and stdin")
def diagnose_escapes() -> tuple[bool, str]:
    d = scratch("d-esc")
    name = d / "r\x1b]0;pwn\x07\u202e\x9b2J.log"
    name.write_bytes(b"\x1b]0;pwned\x07\x1b[2J NPU out of memory \x9b31m \xe2\x80\xae\r\n")
    with gzip.open(d / "g\x1b[2J.log.gz", "wb") as f:
        f.write(b"loss nan \x1b[5m\n")
    text = run([PY, "-m", "npu_runtime.diagnose", str(d)], d, 60)
    js = run([PY, "-m", "npu_runtime.diagnose", "--output-format", "json", str(d)], d, 60)
    stdin = run([PY, "-m", "npu_runtime.diagnose", "-"], d, 60, stdin=b"\x1b[2J EJ0001 \x07\n")
    raw = any(c in text.out + stdin.out for c in ("\x1b", "\x07", "\x9b", "\u202e"))
    raw_json = any(c in js.out for c in ("\x1b", "\x07"))
    held = text.code == 1 and js.code == 1 and stdin.code == 1 and not raw and not raw_json and all(
        no_traceback(r) for r in (text, js, stdin))
    return held, f"text exit {text.code}, json {js.code}, stdin {stdin.code}; raw controls: {raw or raw_json}"


@case("diagnose: loss nan / inf free text and device removed phrasing, near-misses")
def diagnose_phrasing() -> tuple[bool, str]:
    d = scratch("d-phrase")
    must = {
        "nan-loss": ["step 320 loss nan lr 3.0e-04", "epoch 3 | loss inf | 1.2 it/s", "Loss is NaN, stopping",
                     "iter 10 loss -inf", "[rank0] loss: nan", "{'loss': nan, 'grad_norm': 1.0}"],
        "device-link-lost": ["[devdrv] device 3 has been removed", "npu 1 was disconnected",
                             "davinci2 disconnected", "PCIe link lost on 0000:80:00.0", "Device[7] lost heartbeat."],
    }
    never = ["grad norm: nan", "x = torch.nan_to_num(loss)", "loss_nan_count: 0", "loss scale: 65536, found inf",
             "loss information saved", "nan_loss_steps=0", "no NaN in loss", "device removed_count=0",
             "USB device number 3 using xhci_hcd", "link_down_count: 0"]
    wrong = []
    for want, lines in must.items():
        for line in lines:
            (d / "a.log").write_text(line + "\n")
            r = _diagnose(d / "a.log", "--output-format", "json")
            ids = [x["id"] for x in json.loads(r.out[r.out.index("{"):])["diagnoses"]] if "{" in r.out else []
            if want not in ids:
                wrong.append(f"missed {line!r}")
    for line in never:
        (d / "a.log").write_text(line + "\n")
        r = _diagnose(d / "a.log", "--output-format", "json")
        ids = [x["id"] for x in json.loads(r.out[r.out.index("{"):])["diagnoses"]] if "{" in r.out else []
        if ids:
            wrong.append(f"{line!r} -> {ids}")
    return not wrong, "; ".join(wrong) or f"{sum(map(len, must.values()))} matched, {len(never)} near-misses clean"


# -------------------------------------------------------------------- the engine's CLI

CUDA_PY = "import torch\nn = torch.cuda.device_count()\nfrom apex import amp\n"


def _npu_migrate(args: list[str], cwd: Path, limit: float = 120) -> Run:
    return run([PY, "-m", "npu_migrate", *args], cwd, limit)


@case("reports: hostile file names in text, grouped, markdown, github, json, sarif")
def report_names() -> tuple[bool, str]:
    d = scratch("f-names")
    for name in ("a\n::error file=x::INJECTED.py", "b\x1b]0;pwn\x07.py", "c\r::notice::x.py", "d\u202etxt.py"):
        (d / name).write_text(CUDA_PY)
    bad = []
    for fmt in ("text", "grouped", "markdown", "github", "json", "sarif", "gitlab"):
        r = _npu_migrate(["--no-cache", "--output-format", fmt, "."], d)
        lines = [x for x in r.out.splitlines() if not x.startswith((" ", "+", "-", "@@"))]
        if r.code is None or not no_traceback(r):
            bad.append(f"{fmt}: exit {r.code}")
        if any(x.startswith(("::error file=x", "::notice::")) for x in lines):
            bad.append(f"{fmt}: a workflow command injected")
        if any(c in x for x in lines for c in ("\x1b", "\x07", "\u202e")):
            bad.append(f"{fmt}: raw controls")
    return not bad, "; ".join(bad) or "7 formats: names escaped, no injected line"


@case(".gitignore as /dev/zero link, FIFO, directory, 50 MB of NUL; nested invalid patterns")
def gitignore_special() -> tuple[bool, str]:
    bad = []
    for kind in ("zero", "fifo", "dir", "nul", "nested"):
        d = scratch(f"g-{kind}")
        (d / "a.py").write_text(CUDA_PY)
        gi = d / ".gitignore"
        if kind == "zero":
            gi.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(gi)
        elif kind == "dir":
            gi.mkdir()
        elif kind == "nul":
            _fill(gi, "\0" * 65536)
        else:
            (d / "sub").mkdir()
            (d / "sub" / "b.py").write_text(CUDA_PY)
            (d / "sub" / ".gitignore").write_text("!\n[\n\\\n**/!\n[z-a]\n!**/[\n")
        r = _npu_migrate(["--no-cache", "--write", "."], d, 60)
        if kind == "nul":  # past the 1 MB bound: one error line, the rest migrated, exit 2
            if r.code != 2 or r.out.count(".gitignore:1:") != 1:
                bad.append(f"{kind}: exit {r.code} {r.out[-120:]!r}")
            continue
        if r.code is None or not no_traceback(r) or "torch.npu" not in (d / "a.py").read_text():
            bad.append(f"{kind}: exit {r.code} {r.out[-120:]!r}")
    return not bad, "; ".join(bad) or "5 shapes: migrated (NUL: one error line, exit 2), no traceback, no hang"


@case(".gitignore / exclude patterns with many wildcards (backtracking) against long names")
def gitignore_wildcards() -> tuple[bool, str]:
    bad = []
    for i, pattern in enumerate(["*a" * 25 + "*b", "a/**/a/**/a/**/b", "**/*a*a*a*b"]):
        d = scratch(f"g-wild/{i}")
        (d / ("a" * 200 + ".py")).write_text(CUDA_PY)
        deep = d.joinpath(*["a"] * 300)
        deep.mkdir(parents=True)
        (deep / "t.py").write_text(CUDA_PY)
        (d / ".gitignore").write_text(pattern + "\n")
        r = _npu_migrate(["--no-cache", "."], d, 60)
        if r.code != 2 or r.out.count(".gitignore:1:") != 1 or not no_traceback(r):
            bad.append(f"{pattern!r}: exit {r.code} in {r.seconds:.0f}s")
    return not bad, "; ".join(bad) or "3 patterns: one error line each, exit 2, in seconds"


@case("parsers: 50 MB markdown, 30 MB YAML/TOML/shell/Dockerfile/requirements, the largest accepted, 50 MB notebooks")
def parsers_large() -> tuple[bool, str]:
    d = scratch("p-large")
    (d / "good.py").write_text(CUDA_PY)
    sizes = {"README.md": 50 * MB, "notes.md": 50 * MB}
    shapes = {
        "README.md": ("```bash\n" + "[![" * 20 + "`" * 30 + "\n") ,
        "notes.md": "- > * ```sh\n",
        "c.yaml": "- {a: [cuda, &x b, *x, ? c]}\n",
        "c.toml": "a = ['cuda', {b = \"\"\"x\"\"\"}]\n",
        "run.sh": "CUDA_VISIBLE_DEVICES=0 torchrun $(echo \"${A:-$(b)}\") <<EOF\nx\nEOF\n",
        "Dockerfile": "RUN CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node 8 train.py\n",
        "requirements.txt": "torch==2.1.0+cu118 --extra-index-url https://download.pytorch.org/whl/cu118\n",
        "small/run.sh": "CUDA_VISIBLE_DEVICES=0 torchrun train.py\n",
        "small/Dockerfile": "RUN CUDA_VISIBLE_DEVICES=0 torchrun train.py\n",
        "small/requirements.txt": "torch==2.1.0+cu118\n",
    }
    (d / "small").mkdir()
    sizes.update({"small/run.sh": 2 * MB - 100, "small/Dockerfile": 2 * MB - 100, "small/requirements.txt": 38000})
    worst = []
    for name, unit in shapes.items():
        _fill(d / name, unit, sizes.get(name, 30 * MB))
    # notebooks: 50 MB of markdown cells; one code cell of 50 MB of comment lines
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# x [" * 20 + "\n"]}] * 400000
    (d / "m.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    src = ["# torch.cuda\n"] * 4000000
    (d / "c.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                                      "execution_count": None, "source": src}],
                                           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    notes = []
    for name in [*shapes, "m.ipynb", "c.ipynb"]:
        r = _npu_migrate(["--no-cache", name], d, 60)
        notes.append(f"{name} exit {r.code} {r.seconds:.0f}s")
        if r.code is None or not no_traceback(r):
            worst.append(name)
    return not worst, ", ".join(notes)


@case("signals during --write --jobs 2 (20 trials, SIGHUP/SIGTERM/SIGINT to parent or group)")
def write_signals() -> tuple[bool, str]:
    rnd = random.Random(5)
    left, torn, tracebacks = 0, 0, 0
    for trial in range(20):
        d = scratch(f"w-sig/{trial}")
        for i in range(40):
            (d / f"m{i}.py").write_text(CUDA_PY * 40)
        proc = subprocess.Popen([PY, "-m", "npu_migrate", "--no-cache", "--write", "--jobs", "2", "."], cwd=d,
                                env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(rnd.uniform(1.0, 6.0))
        signum = rnd.choice([signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
        with contextlib.suppress(ProcessLookupError):
            if rnd.random() < 0.5:
                os.killpg(proc.pid, signum)
            else:
                proc.send_signal(signum)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        tracebacks += b"Traceback" in out
        left += len(list(d.glob("**/.npu-migrate-*.tmp"))) + len([p for p in d.iterdir() if p.name.endswith(".tmp")])
        for f in d.glob("m*.py"):
            text = f.read_text()
            if text != CUDA_PY * 40 and "torch.npu" not in text:
                torn += 1
    return left == 0 and torn == 0 and tracebacks == 0, f"temp files left {left}, torn files {torn}, tracebacks {tracebacks}"


# -------------------------------------------------------------------- verify (item 1)

TRAIN = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    x = torch.randn(8, 4, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 2:
        torch.save(model.state_dict(), "ckpt/model.pt")
"""


def _verify(proj: Path, limit: float = 180, extra: list[str] | None = None) -> Run:
    return run([PY, "-m", "npu_migrate", "verify", "train.py", "--no-resume", *(extra or [])], proj, limit)


def _snapshot(path: Path) -> dict[str, tuple[int, float]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime)
    return out


@case("verify: links into /proc (kmsg, self), a relative chain climbing out, a hard link, deep FIFO/socket")
def verify_links() -> tuple[bool, str]:
    d = scratch("v-links")
    proj, outside = d / "proj", d / "outside"
    (proj / "a" / "b").mkdir(parents=True)
    (proj / "store").mkdir()
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"x" * 100)
    (proj / "train.py").write_text(TRAIN)
    (proj / "ckpt").symlink_to("a/b/c")
    (proj / "a" / "b" / "c").symlink_to("../../store")
    (proj / "a" / "up").symlink_to("../../outside")  # climbs out with ..
    (proj / "a" / "b" / "chain").symlink_to("../up/data.bin")
    os.link(outside / "data.bin", proj / "hard.bin")
    (proj / "kmsg").symlink_to("/proc/kmsg")
    (proj / "self").symlink_to("/proc/self")
    os.mkfifo(proj / "a" / "b" / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(proj / "a" / "sock"))
    before, before_out = _snapshot(proj), _snapshot(outside)
    scratch_before = verify_scratch_dirs()
    r = _verify(proj)
    sock.close()
    changed = [p for p, v in _snapshot(proj).items() if before.get(p) != v]
    changed += [p for p, v in _snapshot(outside).items() if before_out.get(p) != v]
    left = verify_scratch_dirs() - scratch_before
    held = r.code == 0 and no_traceback(r) and not changed and not left
    return held, f"exit {r.code} in {r.seconds:.0f}s; changed {changed[:3]}; scratch left {sorted(left)[:2]}"


ESCAPER = """\
import os, signal, subprocess, sys, time
import torch
def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            time.sleep(600)
        os._exit(0)
daemon()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)  # a process group of its own
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                 env={"PATH": "/usr/bin"}, start_new_session=True)
""" + TRAIN


@case("verify: a twin that double-forks + setsid + ignores TERM, changes its group, env-cleared setsid child")
def verify_escapers() -> tuple[bool, str]:
    d = scratch("v-procs")
    proj = d / "proj"
    (proj / "store").mkdir(parents=True)
    (proj / "ckpt").symlink_to("store")
    (proj / "train.py").write_text(ESCAPER)
    r = _verify(proj)
    time.sleep(2)
    left = _sleepers()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return r.code is not None and no_traceback(r) and not left, f"exit {r.code} in {r.seconds:.0f}s; left {left}"


def _sleepers() -> list[int]:
    """Processes of this attack still alive (their command line or environment)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if b"time.sleep(600)" in cmd or "npu-migrate-verify-" in cwd and b"train.py" in cmd:
            out.append(int(entry))
    return out


@case("verify: SIGHUP / SIGTERM / SIGINT at random moments (6 trials)")
def verify_signals() -> tuple[bool, str]:
    rnd = random.Random(38)
    bad = []
    for trial in range(6):
        d = scratch(f"v-sig/{trial}")
        proj = d / "proj"
        (proj / "store").mkdir(parents=True)
        (proj / "ckpt").symlink_to("store")
        (proj / "train.py").write_text(ESCAPER)
        before = verify_scratch_dirs()
        proc = subprocess.Popen([PY, "-m", "npu_migrate", "verify", "train.py", "--no-resume"], cwd=proj,
                                env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(rnd.uniform(2, 14))
        signum = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)[trial % 3]
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            bad.append(f"{trial}: no exit in 60 s after {signum.name}")
        time.sleep(2)
        left = _sleepers()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        dirs = verify_scratch_dirs() - before
        if left or dirs or b"Traceback" in out:
            bad.append(f"{trial} {signum.name}: processes {left}, scratch {sorted(dirs)}, "
                       f"traceback {b'Traceback' in out}")
    return not bad, "; ".join(bad) or "6 trials: exit at once, no process, no scratch left"


# -------------------------------------------------------------------- the health channel (item 2)

HEALTH_TRAIN = """\
import sys, time, torch
import npu_runtime
npu_runtime.install()
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(int(sys.argv[1])):
    loss = model(torch.randn(4, 4)).sum() * float("nan")
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(float(sys.argv[2]))
print("TRAINED", flush=True)
"""


@case("health events: /dev/full, FIFO without reader, read-only dir, parent removed mid-run, slow FIFO reader")
def health_events() -> tuple[bool, str]:
    d = scratch("e-events")
    (d / "t.py").write_text(HEALTH_TRAIN)
    ro = d / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    os.mkfifo(d / "fifo")
    os.mkfifo(d / "slow")
    (d / "gone").mkdir()
    targets = {"full": ("/dev/full", 6, 0.05), "fifo": (str(d / "fifo"), 6, 0.05),
               "ro": (str(ro / "ev.jsonl"), 6, 0.05), "gone": (str(d / "gone" / "ev.jsonl"), 40, 0.1),
               "slow": (str(d / "slow"), 3000, 0.0)}
    bad, notes = [], []
    for name, (path, steps, pause) in targets.items():
        env = {"NPU_RUNTIME_EVENTS": path, "NPU_RUNTIME_HEALTH_ACTION": "warn"}
        reader = None
        if name == "slow":  # reads a byte a second: the pipe fills, writes would block
            reader = subprocess.Popen(["sh", "-c", f"while :; do dd if={path} bs=1 count=1 2>/dev/null; sleep 1; done"],
                                      stdout=subprocess.DEVNULL, start_new_session=True)
            time.sleep(0.5)
        proc = subprocess.Popen([PY, str(d / "t.py"), str(steps), str(pause)], cwd=d,
                                env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", **env},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        if name == "gone":
            time.sleep(12)
            shutil.rmtree(d / "gone", ignore_errors=True)
        try:
            out, _ = proc.communicate(timeout=90)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            code = None
        if reader is not None:
            os.killpg(reader.pid, signal.SIGKILL)
            reader.wait()
        text = out.decode(errors="replace")
        warnings = text.count("cannot write events")
        notes.append(f"{name}: exit {code}, {warnings} warning(s)")
        if code != 0 or "TRAINED" not in text or "Traceback" in text or warnings > 1:
            bad.append(f"{name}: exit {code} {text[-200:]!r}")
    os.chmod(ro, 0o700)
    return not bad, "; ".join(bad) or ", ".join(notes)


# -------------------------------------------------------------------- the light install (item 5)

@case("light install: pip install . into a fresh venv without torch, each command once")
def light_install() -> tuple[bool, str]:
    d = scratch("l-light")
    venv = d / "venv"
    r = run([PY, "-m", "venv", "--system-site-packages", str(venv)], d, 120)
    if r.code != 0:
        return False, f"venv: {r.out[-200:]}"
    vpy = str(venv / "bin" / "python")
    probe = run([vpy, "-c", "import torch"], d, 60, env={"PYTHONPATH": ""})
    if probe.code == 0:
        # the system site has torch: hide it with a finder that refuses it
        (d / "sitecustomize.py").write_text(
            "import sys\nclass _No:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'numpy', 'npu_runtime'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, _No())\n")
    inst = run([vpy, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", str(ROOT)],
               d, 300, env={"PYTHONPATH": ""})
    if inst.code != 0:
        return False, f"pip install: exit {inst.code} {inst.out[-300:]!r}"
    proj = d / "proj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN)
    (proj / "x.log").write_text("NPU out of memory\n")
    env = {"PYTHONPATH": str(d)}
    bad = []
    for args, want in ((["emulate", "train.py"], 2), (["verify", "train.py"], 2), (["diagnose", "x.log"], 1),
                       (["preflight", "--help"], 0), (["launch", "--help"], 0)):
        r = run([vpy, "-m", "npu_migrate", *args], proj, 60, env=env)
        if r.code != want or not no_traceback(r):
            bad.append(f"{args[0]}: exit {r.code} {r.out[-160:]!r}")
    return not bad, "; ".join(bad) or "5 commands: one line or a result, no traceback"


# -------------------------------------------------------------------- the emulator and the runtime (6, 7)

def _emulated(script: Path, args: list[str], nproc: int, env: dict, limit: float) -> Run:
    return run([PY, "-m", "npu_migrate.emulate", "--nproc", str(nproc), str(script), *args], script.parent, limit,
               env=env)


@case("emulator: two-process GPT sampling (mp.spawn), identical over repeated runs, each exits 0")
def emulator_determinism(runs: int = int(os.environ.get("H5_RUNS", "5"))) -> tuple[bool, str]:
    script = ROOT / "tests" / "emulator" / "scripts" / "gpt_sample.py"
    d = scratch("r-determinism")
    results, bad = [], []
    for i in range(runs):
        out = d / f"run{i}"
        out.mkdir()
        r = _emulated(script, ["--steps", "4", "--out", str(out)], 1,
                      {"NPU_MIGRATE_EMULATOR_DEVICES": "2", "GPT_SORTED_VOCAB": "0"}, 150)
        if r.code != 0:
            bad.append(f"run {i}: exit {r.code} after {r.seconds:.0f}s")
            continue
        lines = [line for line in r.out.splitlines() if line.startswith("{")]
        if len(lines) != 2 or any(len(json.loads(x).get("tokens", [])) == 0 for x in lines):
            bad.append(f"run {i}: {len(lines)} rank records")
        results.append(lines)
    differ = sum(1 for x in results[1:] if x != results[0])
    return not bad and differ == 0, (f"{len(results)}/{runs} runs exited 0, {differ} differ from the first; "
                                     + "; ".join(bad))


@case("emulator: a finished 2-rank torchrun job exits (repeated)")
def emulator_torchrun_exit(runs: int = int(os.environ.get("H5_RUNS", "5"))) -> tuple[bool, str]:
    d = scratch("r-torchrun")
    script = d / "ddp.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "import torch_npu\n"
        "dist.init_process_group('hccl')\n"
        "rank = dist.get_rank(); torch.npu.set_device(rank)\n"
        "model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).npu())\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    loss = model(torch.randn(8, 4).npu()).sum(); opt.zero_grad(); loss.backward(); opt.step()\n"
        "dist.destroy_process_group()\n"
        "print('rank', rank, 'done', flush=True)\n")
    times, bad = [], []
    for i in range(runs):
        r = _emulated(script, [], 2, {}, 120)
        times.append(f"{r.seconds:.0f}")
        if r.code != 0 or r.out.count("done") != 2:
            bad.append(f"run {i}: exit {r.code} {r.out[-200:]!r}")
    return not bad, f"{runs} runs, seconds {','.join(times)}; " + "; ".join(bad)


def _runtime_case(name: str, trials: int) -> tuple[bool, str]:
    r = run([PY, "-m", "bench.adversarial_runtime", "--trials", str(trials), "--only", name], ROOT, 1500)
    line = next((x for x in r.out.splitlines() if x.startswith(f"| {name}")), "")
    cells = [c.strip() for c in line.strip("|").split("|")]
    held = len(cells) > 3 and cells[1] == cells[2] and cells[3] == "0"
    return held, line or r.out[-200:]


@case("runtime: a failing sharded save leaves no .trash-* (11 runs)")
def runtime_trash() -> tuple[bool, str]:
    return _runtime_case("ckpt: failing sharded save", 11)


@case("runtime: a forked worker hung holding the GIL (after steps)")
def runtime_gil() -> tuple[bool, str]:
    return _runtime_case("processes: forked worker hung holding the GIL", 2)


GIL_AFTER_STEPS = """\
import multiprocessing as mp, os, re, sys, time
import torch
import npu_runtime
def hog():
    open(os.path.join(sys.argv[1], "child"), "w").write(str(os.getpid()))
    re.match(r"(a+)+$", "a" * 64 + "b")  # holds the GIL for hours
if __name__ == "__main__":
    os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="4", NPU_RUNTIME_WATCHDOG_DIR=sys.argv[1])
    npu_runtime.install()
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(4, 4)).sum(); opt.zero_grad(); loss.backward(); opt.step()
    ctx = mp.get_context(sys.argv[2])
    p = ctx.Process(target=hog); p.start(); p.join()
    print("JOINED", flush=True)
"""


@case("runtime: a worker hung holding the GIL, started after 3 training steps (fork and forkserver)")
def runtime_gil_after_steps() -> tuple[bool, str]:
    bad, notes = [], []
    for method in ("fork", "forkserver"):
        d = scratch(f"r-gil/{method}")
        (d / "t.py").write_text(GIL_AFTER_STEPS)
        r = run([PY, str(d / "t.py"), str(d), method], d, 90)
        time.sleep(2)
        child = (d / "child").read_text() if (d / "child").exists() else ""
        alive = child.isdigit() and Path(f"/proc/{child}").exists()
        if alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child), signal.SIGKILL)
        notes.append(f"{method}: exit {r.code} in {r.seconds:.0f}s, child left {alive}")
        if r.code != 75 or alive or r.seconds > 60:
            bad.append(notes[-1])
    return not bad, "; ".join(notes)


def main(argv: list[str] | None = None, cases: dict | None = None, base: Path | None = None,
         description: str | None = None) -> int:
    """Run the attacks (this round's, or another round's ``cases`` under ``base``) and
    print the table; exit 1 when one broke."""
    cases = CASES if cases is None else cases
    base = BASE if base is None else base
    p = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    p.add_argument("-k", default="", help="only the cases whose name holds this text")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    chosen = [n for n in cases if args.k.lower() in n.lower()]
    if args.list:
        print("\n".join(chosen))
        return 0
    base.mkdir(parents=True, exist_ok=True)
    print("| attack | result | evidence |\n|---|---|---|", flush=True)
    broke = 0
    for name in chosen:
        start = time.monotonic()
        try:
            held, evidence = cases[name]()
        except Exception as exc:  # noqa: BLE001 - the runner's own failure is a broken trial too
            held, evidence = False, f"runner: {type(exc).__name__}: {exc}"
        broke += not held
        print(f"| {name} | {'held' if held else '**broke**'} | {evidence} ({time.monotonic() - start:.0f} s) |",
              flush=True)
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
