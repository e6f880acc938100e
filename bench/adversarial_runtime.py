"""The runtime's adversarial round (issues 29 and 30), as bounded trials.

Each case runs in a fresh interpreter under a time limit and prints ``HELD`` or
``BROKE: <why>``; a trial that exceeds its limit is a hang (broke), any other output
(a traceback) is broke too. Cases:

* planted checkpoints in a shared directory: a hostile DCP ``.metadata`` pickle (must not
  run), manifest entries that are a ``/dev/zero`` symlink or a FIFO, a manifest that is a
  ``/dev/zero`` symlink / FIFO / huge sparse file / garbage, a 100 MB garbage file as the
  newest "checkpoint", 20,000 empty ``step-*`` directories, symlinks planted under the old
  predictable temporary names, a second job saving into the same directory, a failing
  ``sharded=True`` save (CheckpointError, no litter);
* hostile environments: 5000-digit ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_PORT``, ``MA_NUM_GPUS``, ``HCCL_EXEC_TIMEOUT`` (``install()`` must not raise,
  ``init_distributed()`` must raise ``LaunchError`` naming the variable), 100k-entry
  ``NPU_RUNTIME_HOST_IP``, watchdog timeouts of 1e10 and 1e300;
* sick processes: a ``torch.compile`` warm-up longer than the step timeout (must live), a
  hang before the first step (must die with 75 within the first-step timeout), a rank
  killed with stuck persistent DataLoader workers (fork, spawn) and a ``setsid -f`` daemon
  (nothing may be left), a hung ``mp.Process`` worker whose parent only joins (parent must
  exit 75), a forked worker hung in GIL-holding C code (caught, parent exits 75).

    python -m bench.adversarial_runtime [--trials 1] [--only NAME,...] [--out bench/results/adversarial-runtime.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PRELUDE = textwrap.dedent(r"""
    import json, logging, os, pickle, shutil, sys, time, zlib
    import torch
    from pathlib import Path
    from npu_runtime import CheckpointError, CheckpointManager, init_distributed, LaunchError
    from npu_runtime.checkpoint import MANIFEST, STATE_FILE, step_dirname
    root = Path(sys.argv[1])
    def model():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 3)
    def reseal(d, step):
        payload = torch.load(d / STATE_FILE, weights_only=True)
        payload["step"] = step
        os.remove(d / STATE_FILE)
        torch.save(payload, d / STATE_FILE)
        files = {}
        for p in sorted(d.rglob("*")):
            rel = p.relative_to(d).as_posix()
            if rel != MANIFEST and p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                files[rel] = {"size": len(data), "crc32": zlib.crc32(data)}
        return files
    def manifest(d, step, files):
        (d / MANIFEST).unlink(missing_ok=True)
        (d / MANIFEST).write_text(json.dumps({"format": "npu_runtime.checkpoint/1", "step": step, "files": files}))
    def plant(src, dst):
        shutil.copytree(root / step_dirname(src), root / step_dirname(dst))
        return root / step_dirname(dst)
    def good_pair():
        m = CheckpointManager(root, keep=5)
        m.save(10, model=model()); m.save(20, model=model())
    def expect(cond, why):
        print("HELD" if cond else "BROKE: " + why, flush=True)
""")


class _Evil:  # pickled into the planted metadata: unpickling it creates a marker file
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


CASES: dict[str, tuple[float, str]] = {
    "ckpt: hostile DCP .metadata pickle": (120, r"""
        CheckpointManager(root, sharded=True).save(1, model=model())
        d = plant(1, 2)
        (d / "sharded" / ".metadata").write_bytes(bytes.fromhex(sys.argv[2]))
        manifest(d, 2, reseal(d, 2))
        try:
            point = CheckpointManager(root, sharded=True).load_latest(model=model())
            step = point.step if point else None
        except BaseException as exc:
            step = repr(exc)
        marker = Path(str(root) + "-pwned")
        expect(not marker.exists() and step == 1, f"marker={marker.exists()} step={step}")
    """),
    "ckpt: manifest entry -> /dev/zero": (60, r"""
        good_pair(); d = plant(20, 30); f = reseal(d, 30)
        os.symlink("/dev/zero", d / "x"); f["x"] = {"size": 0, "crc32": 0}; manifest(d, 30, f)
        expect(CheckpointManager(root).load_latest(model=model()).step == 20, "wrong step")
    """),
    "ckpt: manifest entry is a FIFO": (60, r"""
        good_pair(); d = plant(20, 30); f = reseal(d, 30)
        os.mkfifo(d / "x"); f["x"] = {"size": 0, "crc32": 0}; manifest(d, 30, f)
        expect(CheckpointManager(root).load_latest(model=model()).step == 20, "wrong step")
    """),
    "ckpt: MANIFEST.json -> /dev/zero": (60, r"""
        good_pair(); m = root / step_dirname(20) / MANIFEST; m.unlink(); os.symlink("/dev/zero", m)
        expect(CheckpointManager(root).load_latest(model=model()).step == 10, "wrong step")
    """),
    "ckpt: MANIFEST.json is a FIFO": (60, r"""
        good_pair(); m = root / step_dirname(20) / MANIFEST; m.unlink(); os.mkfifo(m)
        expect(CheckpointManager(root).load_latest(model=model()).step == 10, "wrong step")
    """),
    "ckpt: MANIFEST.json 1 GB sparse": (60, r"""
        good_pair(); m = root / step_dirname(20) / MANIFEST; m.unlink()
        with open(m, "wb") as fh: fh.truncate(1 << 30)
        expect(CheckpointManager(root).load_latest(model=model()).step == 10, "wrong step")
    """),
    "ckpt: MANIFEST.json garbage": (60, r"""
        good_pair(); (root / step_dirname(20) / MANIFEST).write_bytes(os.urandom(65536))
        expect(CheckpointManager(root).load_latest(model=model()).step == 10, "wrong step")
    """),
    "ckpt: state.pt -> /dev/zero": (60, r"""
        good_pair(); s = root / step_dirname(20) / STATE_FILE; s.unlink(); os.symlink("/dev/zero", s)
        expect(CheckpointManager(root).load_latest(model=model()).step == 10, "wrong step")
    """),
    "ckpt: 100 MB garbage file as newest": (60, r"""
        good_pair()
        with open(root / step_dirname(30), "wb") as fh: fh.truncate(100 << 20)
        expect(CheckpointManager(root).load_latest(model=model()).step == 20, "wrong step")
    """),
    "ckpt: 20k empty step-* dirs": (120, r"""
        good_pair()
        for s in range(21, 20021): os.mkdir(root / step_dirname(s))
        t = time.monotonic(); step = CheckpointManager(root).load_latest(model=model()).step
        print(f"load_latest {time.monotonic() - t:.1f} s", file=sys.stderr)
        expect(step == 20 and time.monotonic() - t < 30, f"step {step}")
    """),
    "ckpt: planted temp-name symlinks": (60, r"""
        victim = Path(str(root) + "-victim"); victim.write_text("precious")
        for k in range(8):
            for n in (f".tmp-latest-{os.getpid()}-{k}", f".tmp-{step_dirname(1)}-{os.getpid()}-{k}"):
                os.symlink(victim, root / n)
        CheckpointManager(root).save(1, model=model())
        expect(victim.read_text() == "precious", "victim overwritten")
    """),
    "ckpt: two jobs, one directory": (90, r"""
        import subprocess
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time, torch; from npu_runtime import "
                                   "CheckpointManager; CheckpointManager(sys.argv[1]).save(1, model=torch.nn.Linear(2, 2)); "
                                   "print('saved', flush=True); time.sleep(60)", str(root)], stdout=subprocess.PIPE, text=True)
        holder.stdout.readline()
        try:
            CheckpointManager(root).save(2, model=model()); refused = False
        except CheckpointError as exc:
            refused = "another process" in str(exc)
        holder.kill(); holder.wait()
        expect(refused, "second job was not refused")
    """),
    "ckpt: failing sharded save": (120, r"""
        import errno
        from torch.distributed.checkpoint import filesystem
        m = CheckpointManager(root, sharded=True); m.save(1, model=model())
        def full(*a, **k): raise OSError(errno.ENOSPC, "No space left on device")
        filesystem.FileSystemWriter.write_data = full
        try:
            m.save(2, model=model()); kind = "no error"
        except CheckpointError:
            kind = "CheckpointError"
        except BaseException as exc:
            kind = type(exc).__name__
        m.wait()
        litter = [n for n in os.listdir(root) if n.startswith((".tmp", ".trash"))]
        expect(kind == "CheckpointError" and not litter, f"{kind}, litter {litter}")
    """),
    "env: 5000-digit integers": (120, r"""
        import importlib; inst = importlib.import_module("npu_runtime.install")
        base = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        bad = []
        for name, env in [(n, base) for n in base if n != "MASTER_ADDR"] + [
                ("MA_NUM_GPUS", {"MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "1"})]:
            e = {**env, name: "9" * 5000, "NPU_RUNTIME_WATCHDOG": "0"}
            inst._reset_for_tests()
            try:
                note = inst.install(environ=dict(e)).note or ""
            except BaseException as exc:
                bad.append(f"install raised {type(exc).__name__} for {name}"); continue
            if name not in note: bad.append(f"no note for {name}")
            try:
                init_distributed(environ=dict(e)); bad.append(f"init accepted {name}")
            except LaunchError as exc:
                if name not in str(exc): bad.append(f"LaunchError without {name}")
            except BaseException as exc:
                bad.append(f"init raised {type(exc).__name__} for {name}")
        inst._reset_for_tests()
        note = inst.install(environ={"HCCL_EXEC_TIMEOUT": "9" * 5000, "NPU_RUNTIME_WATCHDOG": "0"}).note or ""
        if "HCCL_EXEC_TIMEOUT" not in note: bad.append("HCCL_EXEC_TIMEOUT")
        expect(not bad, "; ".join(bad))
    """),
    "env: NPU_RUNTIME_HOST_IP 100k entries": (60, r"""
        import importlib; inst = importlib.import_module("npu_runtime.install")
        e = {"RANK_TABLE_FILE": str(root / "rt.json"), "RANK_ID": "0", "RANK_SIZE": "2", "NPU_RUNTIME_WATCHDOG": "0",
             "NPU_RUNTIME_HOST_IP": ",".join(f"10.0.{i // 256 % 256}.{i % 256}" for i in range(100_000))}
        t = time.monotonic(); note = inst.install(environ=e).note or ""
        expect("NPU_RUNTIME_HOST_IP" in note and time.monotonic() - t < 2, note[:100])
    """),
    "diagnose: 1.4 MB log of `torch_npu requires ...` lines (round 4)": (60, r"""
        import subprocess
        log = root / "big.log"
        log.write_text(("torch_npu " + "requires " * 6600 + "\n") * 24)
        t = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", str(log)], capture_output=True, text=True,
                              timeout=55)
        expect(done.returncode in (0, 1) and "Traceback" not in done.stderr and time.monotonic() - t < 30,
               f"exit {done.returncode} in {time.monotonic() - t:.1f} s")
    """),
    "diagnose: escape sequences in a log line and its name (round 4)": (60, r"""
        import subprocess
        evil = "\x1b]0;owned\x07\x1b[2J\x9b31m"
        log = root / f"rank0{evil}.log"
        log.write_text(f"{evil}RuntimeError: NPU out of memory{evil}\n")
        done = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", str(log)], capture_output=True, text=True,
                              timeout=55)
        out = done.stdout + done.stderr
        expect(done.returncode == 1 and not any(c in out for c in "\x1b\x07\x9b"), repr(out[:100]))
    """),
    "watchdog: timeout 1e10 / 1e300": (60, r"""
        from npu_runtime import Watchdog
        ok = True
        for v in (1e10, 1e300):
            wd = Watchdog(v, grace_s=v, first_step_timeout_s=v); wd.interval_s = 0.02
            with wd:
                time.sleep(0.3); ok = ok and wd._thread.is_alive()
        expect(ok, "checker thread died")
    """),
    "watchdog: torch.compile warm-up > step timeout": (300, r"""
        os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="2")
        os.environ.pop("NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT", None)
        import npu_runtime, torch._dynamo
        npu_runtime.install()
        m = torch.compile(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)),
                          backend="aot_eager")
        opt = torch.optim.SGD(m.parameters(), lr=0.01); t = time.monotonic()
        for _ in range(3):
            m(torch.randn(8, 64)).pow(2).mean().backward(); opt.step(); opt.zero_grad()
        print(f"3 steps in {time.monotonic() - t:.1f} s", file=sys.stderr)
        expect(True, "")
    """),
}

# Cases whose verdict is the exit code / the processes left (run as scripts, not snippets).
SCRIPTS: dict[str, tuple[float, str]] = {
    "watchdog: hang before the first step": (90, r"""
        import os, sys, threading, time
        os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="2", NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT="6",
                          NPU_RUNTIME_WATCHDOG_DIR=sys.argv[1])
        import npu_runtime
        npu_runtime.install()
        threading.Event().wait()
    """),
    "processes: dataloader workers + setsid -f daemon": (180, r"""
        import os, subprocess, sys, time, torch
        from torch.utils.data import DataLoader, Dataset
        import npu_runtime
        from npu_runtime import watchdog
        class Stuck(Dataset):
            def __len__(self): return 100
            def __getitem__(self, i):
                if i >= 2: time.sleep(600)
                return torch.tensor(i)
        if __name__ == "__main__":
            os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="4", NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT="4",
                              NPU_RUNTIME_WATCHDOG_DIR=sys.argv[1])
            npu_runtime.install()
            subprocess.run(["setsid", "-f", sys.executable, "-c", "import time; time.sleep(600)"], check=True)
            loaders = [iter(DataLoader(Stuck(), num_workers=2, persistent_workers=True, multiprocessing_context=m))
                       for m in ("fork", "spawn")]
            with watchdog.active().paused():
                for it in loaders: next(it); next(it)
            from npu_runtime import descendants
            open(os.path.join(sys.argv[1], "tree"), "w").write(" ".join(map(str, descendants.descendants())))
            next(loaders[0])
    """),
    "processes: hung mp.Process, parent only joins": (120, r"""
        import multiprocessing as mp, os, sys, threading
        import npu_runtime
        def hang(): threading.Event().wait()
        if __name__ == "__main__":
            os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="3", NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT="3",
                              NPU_RUNTIME_WATCHDOG_DIR=sys.argv[1])
            npu_runtime.install()
            p = mp.get_context("spawn").Process(target=hang); p.start(); p.join()
    """),
    "processes: forked worker hung holding the GIL": (120, r"""
        import multiprocessing as mp, os, re, sys, time
        import npu_runtime
        def hog():
            time.sleep(1.2)
            open(os.path.join(sys.argv[1], "tree"), "w").write(str(os.getpid()))
            re.match(r"(a+)+$", "a" * 64 + "b")
        if __name__ == "__main__":
            os.environ.update(NPU_RUNTIME_WATCHDOG_TIMEOUT="2", NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT="2",
                              NPU_RUNTIME_WATCHDOG_DIR=sys.argv[1])
            npu_runtime.install(); time.sleep(1.0)
            p = mp.get_context("fork").Process(target=hog); p.start(); p.join()
    """),
}


def _env() -> dict[str, str]:
    drop = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NPU_RUNTIME_INSTALLED",
            "NPU_RUNTIME_HEARTBEAT_DIR", "NPU_RUNTIME_WATCHDOG_TIMEOUT", "NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", NPU_RUNTIME_WATCHDOG="0")
    return env


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _run_snippet(name: str, limit: float, body: str, scratch: Path) -> tuple[bool, str, float]:
    root = scratch / "ck"
    root.mkdir()
    import pickle

    args = [str(root), pickle.dumps(_Evil(str(root) + "-pwned")).hex()]
    code = PRELUDE + textwrap.dedent(body)
    env = _env()
    if "watchdog:" in name and "compile" in name:
        env.pop("NPU_RUNTIME_WATCHDOG")
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                              timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        return False, f"hang (> {limit:g} s)", time.monotonic() - start
    took = time.monotonic() - start
    out = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and out and out[-1] == "HELD":
        return True, "", took
    why = out[-1] if out else (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return False, f"exit {proc.returncode}: {why[:120]}", took


def _run_script(name: str, limit: float, body: str, scratch: Path) -> tuple[bool, str, float]:
    script = scratch / "job.py"
    script.write_text(textwrap.dedent(body))
    env = _env()
    env.pop("NPU_RUNTIME_WATCHDOG")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(script), str(scratch)], env=env, cwd=scratch,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        code = None
    else:
        code = proc.returncode
    took = time.monotonic() - start
    tree_file = scratch / "tree"
    tree = [int(p) for p in tree_file.read_text().split()] if tree_file.exists() else []
    time.sleep(2)  # killed processes need a moment to go
    left = [p for p in tree if _alive(p)]
    for p in left:
        os.kill(p, 9)
    if code is None:
        return False, f"hang (> {limit:g} s); left {left}", took
    if code != 75:
        return False, f"exit {code}, expected 75: {err.strip().splitlines()[-1:] if err else ''}", took
    if left:
        return False, f"left behind: {left}", took
    if "first step" in name and not (6 <= took < 6 + 30):
        return False, f"killed after {took:.1f} s, first-step timeout 6 s", took
    return True, "", took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated substrings of case names")
    parser.add_argument("--out", default="bench/results/adversarial-runtime.md")
    args = parser.parse_args(argv)
    cases = [(n, lim, body, _run_snippet) for n, (lim, body) in CASES.items()]
    cases += [(n, lim, body, _run_script) for n, (lim, body) in SCRIPTS.items()]
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        cases = [c for c in cases if any(k in c[0] for k in keys)]
    rows = []
    for name, limit, body, runner in cases:
        held, broke, worst, notes = 0, 0, 0.0, []
        for _ in range(args.trials):
            with tempfile.TemporaryDirectory(prefix="npu-adv-") as tmp:
                ok, why, took = runner(name, limit, body, Path(tmp))
            worst = max(worst, took)
            if ok:
                held += 1
            else:
                broke += 1
                notes.append(why)
        rows.append((name, args.trials, held, broke, worst, limit, notes[:1]))
        print(f"{name}: {held}/{args.trials} held, worst {worst:.1f} s {notes[:1]}", flush=True)
    title = (f"# Runtime adversarial round ({platform.node()}, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    lines = [title, "",
             "| case | tried | held | broke | worst s | limit s | note |", "|---|---|---|---|---|---|---|"]
    for name, tried, held, broke, worst, limit, notes in rows:
        lines.append(f"| {name} | {tried} | {held} | {broke} | {worst:.1f} | {limit:g} | {'; '.join(notes)} |")
    total = sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows)
    lines.append(f"| **total** | {total[0]} | {total[1]} | {total[2]} | | | |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if total[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
