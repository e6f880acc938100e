"""verify's fork server (npu_migrate/verify/zygote.py; on by default, off with
``NPU_MIGRATE_FORK_SERVER=0`` or ``--no-fork-server``): runs forked from one process per
twin compute what fresh processes compute (also where the server's earlier
``import torch._dynamo`` makes torch take another branch), what a run leaves is killed,
the script's atexit handlers run, and a project shadowing a module the server imported
runs as fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TRAIN = """
import atexit, os, sys, time
import torch

probe = os.environ["PROBE_DIR"]
atexit.register(lambda: open(os.path.join(probe, f"atexit-{os.getpid()}"), "w").close())
if os.fork() == 0:  # a daemon the run leaves behind: setsid, double fork
    os.setsid()
    if os.fork() == 0:
        open(os.path.join(probe, f"daemon-{os.getpid()}"), "w").close()
        time.sleep(300)
    os._exit(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Linear(8, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start = 0
if os.path.exists("ckpt.pt"):
    state = torch.load("ckpt.pt")
    model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"]
for step in range(start, 6):
    x = torch.randn(4, 8, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, "ckpt.pt")
"""


def _verify(project: Path, probe: Path, server: bool, options: tuple[str, ...] = (), args: tuple[str, ...] = (),
            steps: int = 3) -> dict:
    """verify's report; ``server``: as by default (no variable), else NPU_MIGRATE_FORK_SERVER=0
    (or what ``options`` say)."""
    report = project.parent / f"report-{server}-{'-'.join(options + args)}" / "verify.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_MIGRATE_")}
    env["PROBE_DIR"] = str(probe)
    if not server and not options:
        env["NPU_MIGRATE_FORK_SERVER"] = "0"
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", "verify", "--jobs", "2", "--steps", str(steps),
                           *options, "--report", str(report), "train.py", *(["--", *args] if args else [])],
                          cwd=project, env=env, capture_output=True, text=True, timeout=550, check=False)
    assert report.is_file(), proc.stdout + proc.stderr
    return json.loads(report.read_text())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


@pytest.mark.timeout(900)
def test_forked_runs_compute_what_fresh_runs_do_and_leave_nothing(tmp_path, emulator_build):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    probes = {}
    reports = {}
    for server in (True, False):
        probes[server] = tmp_path / f"probe-{server}"
        probes[server].mkdir()
        reports[server] = _verify(project, probes[server], server)
    forked, fresh = reports[True], reports[False]
    assert forked["verdict"] == fresh["verdict"] == "pass", (forked.get("reason"), fresh.get("reason"))
    # four runs (the twins and their restarts), each forked by its twin's server
    assert sorted(forked["fork_server"]) == sorted(
        ["reference twin: forked", "migrated twin: forked", "reference twin, restarted after step 2: forked",
         "migrated twin, restarted after step 2: forked"]), forked["fork_server"]
    assert "fork_server" not in fresh
    # the same computation, step by step, in both twins and after the restart
    for key in ("steps",):
        assert [(r["reference"]["digest"], r["migrated"]["digest"], r["reference"]["losses"]) for r in forked[key]] \
            == [(r["reference"]["digest"], r["migrated"]["digest"], r["reference"]["losses"]) for r in fresh[key]]
    assert [(r["reference"]["digest"], r["migrated"]["digest"]) for r in forked["resume"]["steps"]] == \
        [(r["reference"]["digest"], r["migrated"]["digest"]) for r in fresh["resume"]["steps"]]
    assert forked["paths"] == fresh["paths"]
    for server in (True, False):
        names = [p.name for p in probes[server].iterdir()]
        assert sum(n.startswith("atexit-") for n in names) == 4, names  # every run's atexit handler ran
        daemons = [int(n.split("-")[1]) for n in names if n.startswith("daemon-")]
        assert len(daemons) == 4, names
        time.sleep(0.2)
        assert not [pid for pid in daemons if _alive(pid)], "a daemon outlived verify"


#: A script that calls init_process_group (gloo, one process) before its first optimizer
#: step, where a fresh run has not imported torch._dynamo yet and the server has: torch's
#: ``init_process_group`` then clears dynamo's trace-rule caches in a forked run only
#: (torch/distributed/distributed_c10d.py, ``if "torch._dynamo" in sys.modules``). With
#: ``--compile`` the model runs through torch.compile (dynamo and AOT autograd; inductor
#: has no kernels for the emulated NPU), whose tracing reads those caches.
PROCESS_GROUP = """
import os, sys
import torch
import torch.distributed as dist

probe = os.environ["PROBE_DIR"]
open(os.path.join(probe, f"dynamo-{'torch._dynamo' in sys.modules}-{os.getpid()}"), "w").close()
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("gloo", rank=0, world_size=1)
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2)).to(device)
forward = torch.compile(model, backend="aot_eager") if "--compile" in sys.argv else model
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start = 0
if os.path.exists("ckpt.pt"):
    state = torch.load("ckpt.pt")
    model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"]
for step in range(start, 6):
    x = torch.randn(4, 8, device=device)
    loss = forward(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():  # gloo reduces CPU tensors
        grad = p.grad.cpu()
        dist.all_reduce(grad)
        p.grad.copy_(grad)
    opt.step()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, "ckpt.pt")
dist.destroy_process_group()
"""


@pytest.mark.timeout(900)
@pytest.mark.parametrize("args", [(), ("--compile",)], ids=["process-group", "process-group-compile"])
def test_torch_dynamo_imported_by_the_server_changes_nothing_the_script_computes(tmp_path, emulator_build, args):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(PROCESS_GROUP)
    probes, reports = {}, {}
    for server in (True, False):
        probes[server] = tmp_path / f"probe-{server}"
        probes[server].mkdir()
        reports[server] = _verify(project, probes[server], server, () if server else ("--no-fork-server",), args)
    forked, fresh = reports[True], reports[False]
    assert forked["verdict"] == fresh["verdict"] == "pass", (forked.get("reason"), fresh.get("reason"))
    assert len(forked["fork_server"]) == 4 and all(line.endswith(": forked") for line in forked["fork_server"]), \
        forked["fork_server"]
    assert "fork_server" not in fresh
    # torch took the other branch in init_process_group: dynamo imported in every forked run only
    seen = {server: sorted(p.name.split("-")[1] for p in probes[server].iterdir()) for server in (True, False)}
    assert seen == {True: ["True"] * 4, False: ["False"] * 4}, seen
    # and yet every step of both twins, the restarts and the code paths are the same
    assert forked["steps"] == fresh["steps"]
    assert forked["resume"]["steps"] == fresh["resume"]["steps"]
    assert forked["resume"]["status"] == fresh["resume"]["status"] == "pass", forked["resume"]
    assert forked["paths"] == fresh["paths"]
    assert forked["paths"]["reference"]["0"]["process_group"] == {"backend": "gloo", "world_size": 1}


#: A project's own typing_extensions.py (which torch imports): it notes that it was
#: imported, then stands aside for the real one.
SHADOW = """
import importlib, os, sys
open(os.path.join(os.environ["PROBE_DIR"], f"shadow-{os.getpid()}"), "w").close()
here, saved = os.path.dirname(os.path.abspath(__file__)), list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules[__name__]
try:
    sys.modules[__name__] = importlib.import_module(__name__)
finally:
    sys.path[:] = saved
"""


@pytest.mark.timeout(600)
def test_a_project_shadowing_a_module_the_server_imported_runs_fresh(tmp_path, emulator_build):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "typing_extensions.py").write_text(SHADOW)
    probe = tmp_path / "probe"
    probe.mkdir()
    report = _verify(project, probe, True)
    assert report["verdict"] == "pass", report.get("reason")
    imported = [p.name for p in probe.iterdir() if p.name.startswith("shadow-")]
    assert len(imported) >= 4, imported  # each fresh run imported the project's module
    assert len(report["fork_server"]) == 4 and all(
        "fresh (" in line and "typing_extensions.py has the name of a module" in line
        for line in report["fork_server"]), report["fork_server"]


HANG = """
import torch
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.ones(1, 2)).sum().backward()
while True:
    pass
"""


@pytest.mark.timeout(600)
def test_a_forked_run_past_the_timeout_is_ended(tmp_path, emulator_build):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(HANG)
    report = project.parent / "report" / "verify.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_MIGRATE_")}  # the server: the default
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "npu_migrate", "verify", "--jobs", "2", "--steps", "2", "--timeout", "20",
                    "--report", str(report), "train.py"], cwd=project, env=env, capture_output=True, text=True,
                   timeout=500, check=False)
    data = json.loads(report.read_text())
    assert data["verdict"] == "error" and "timed out" in data["reason"], data.get("reason")
    assert data["fork_server"] and all(line.endswith(": forked") for line in data["fork_server"])
    assert time.monotonic() - start < 200


KILLS_PARENT = """
import os, signal, subprocess, sys
import torch
probe = os.environ["PROBE_DIR"]
daemon = subprocess.Popen(["sleep", "300"], env={}, start_new_session=True)  # no marker, own session
open(os.path.join(probe, f"daemon-{daemon.pid}"), "w").close()
os.kill(os.getppid(), signal.SIGKILL)  # the server (a fresh run's: its supervisor)
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
"""


@pytest.mark.timeout(600)
def test_a_script_that_kills_its_server_is_ended_and_leaves_nothing(tmp_path, emulator_build):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(KILLS_PARENT)
    verdicts, reports = {}, {}
    for server in (True, False):
        probe = tmp_path / f"probe-{server}"
        probe.mkdir()
        reports[server] = _verify(project, probe, server)
        verdicts[server] = reports[server]["verdict"]
        time.sleep(0.3)
        daemons = [int(p.name.split("-")[1]) for p in probe.iterdir() if p.name.startswith("daemon-")]
        assert daemons and not [pid for pid in daemons if _alive(pid)], daemons
    assert verdicts[True] == verdicts[False] == "error", verdicts  # the reference could not run
    assert any(line.endswith("the server died during the run") for line in reports[True]["fork_server"]), \
        reports[True]["fork_server"]


WAITS = """
import os, subprocess, time
import torch
probe = os.environ["PROBE_DIR"]
daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
open(os.path.join(probe, f"pids-{os.getppid()}-{daemon.pid}"), "w").close()
while True:
    time.sleep(0.1)
"""


@pytest.mark.timeout(600)
def test_ctrl_c_during_a_forked_run_ends_the_run_and_the_servers(tmp_path, emulator_build):
    import signal

    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(WAITS)
    probe = tmp_path / "probe"
    probe.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_MIGRATE_")}
    env.update(PROBE_DIR=str(probe))  # the server: the default
    proc = subprocess.Popen([sys.executable, "-m", "npu_migrate", "verify", "--jobs", "2", "--steps", "2",
                             "train.py"], cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        end = time.monotonic() + 300
        while len(list(probe.iterdir())) < 2 and time.monotonic() < end:
            time.sleep(0.2)
        pids = [[int(x) for x in p.name.split("-")[1:]] for p in probe.iterdir()]
        assert len(pids) == 2, pids
        for parent, _ in pids:  # both runs forked by their twin's server
            assert b"npu_migrate.verify.zygote" in Path(f"/proc/{parent}/cmdline").read_bytes()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    time.sleep(0.3)
    left = [pid for pair in pids for pid in pair if _alive(pid)]
    assert not left, left  # the servers (the runs' parents) and the daemons
