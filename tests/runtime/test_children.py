"""Worker processes of an installed process get the runtime: torch.multiprocessing.spawn
workers resolve their rank from the spawn index, multiprocessing.Process workers get a
watchdog of their own, library workers (DataLoader, Pool) get nothing."""

import json
import textwrap

import pytest
from npu_runtime import WATCHDOG_EXIT_CODE

from ._helpers import child_env, free_port, run_script

TIMEOUT = 4.0  # short for speed, long enough that a child starved of CPU on a loaded machine is not taken for hung

SPAWN_JOB = textwrap.dedent(r"""
    import json, os, sys, threading
    import torch
    import torch.distributed.nn                  # before any group (docs/e2e.md, "Exit aborts")
    import torch.distributed as dist
    import torch.multiprocessing as tmp
    import npu_runtime

    def worker(i, out, hang):
        rep = npu_runtime.install()              # already done by the runtime: the same report
        info = {"i": i, "child": rep.child, "source": rep.source, "rank": os.environ.get("RANK"),
                "local_rank": os.environ.get("LOCAL_RANK"), "note": rep.note,
                "watchdog": rep.watchdog.timeout_s if rep.watchdog else None}
        dist.init_process_group("gloo")          # the script's own env:// init, unchanged
        t = torch.ones(1) * (dist.get_rank() + 1)
        dist.all_reduce(t)
        info["sum"] = t.item()
        with open(os.path.join(out, f"worker{i}.json"), "w") as fh:
            json.dump(info, fh)
        if hang and i == 1:
            threading.Event().wait()             # hangs: its own watchdog must end it
        dist.destroy_process_group()

    if __name__ == "__main__":
        rep = npu_runtime.install()
        print("parent note:", rep.note, flush=True)
        tmp.spawn(worker, args=(sys.argv[1], sys.argv[2] == "hang"), nprocs=2)
        print("parent done", flush=True)
""")


def _node_env(**extra):
    # An Ascend Operator node with two devices: RANK is the node rank, LOCAL_RANK a list.
    return child_env(RANK="0", LOCAL_RANK="{0,1}", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(free_port()), NPU_RUNTIME_WATCHDOG_TIMEOUT=str(TIMEOUT), **extra)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spawned_workers_get_their_rank_and_a_watchdog(tmp_path):
    proc = run_script(tmp_path, SPAWN_JOB, tmp_path, "ok", env=_node_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "slot is unknown" in proc.stdout and "parent done" in proc.stdout
    workers = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in (0, 1)]
    for i, w in enumerate(workers):
        assert w["child"] == f"spawn[{i}]" and w["source"] == "ascend-operator" and w["note"] is None
        assert (w["rank"], w["local_rank"]) == (str(i), str(i))
        assert w["watchdog"] == TIMEOUT and w["sum"] == 3.0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_hung_spawned_worker_is_killed_and_its_waiting_parent_is_not(tmp_path):
    env = _node_env(NPU_RUNTIME_WATCHDOG_DIR=str(tmp_path))
    proc = run_script(tmp_path, SPAWN_JOB, tmp_path, "hang", env=env, timeout=180)
    assert proc.returncode == WATCHDOG_EXIT_CODE, proc.stderr  # the worker's class, not mp.spawn's traceback's 1
    assert f"exit code {WATCHDOG_EXIT_CODE}" in proc.stderr  # mp.spawn reports the worker's code
    assert "parent done" not in proc.stdout
    dumps = list(tmp_path.glob("npu_runtime-watchdog-*.txt"))
    assert len(dumps) == 1 and "worker" in dumps[0].read_text()  # only the worker was killed
    assert proc.stderr.count("showed no sign of life") == 1


PROCESS_JOB = textwrap.dedent(r"""
    import json, os, sys, threading
    import multiprocessing as mp
    import torch
    from torch.utils.data import DataLoader
    import npu_runtime
    from npu_runtime import watchdog

    def probe(path):
        rep = npu_runtime.install()
        with open(path, "w") as fh:
            json.dump({"child": rep.child, "watchdog": watchdog.active() is not None}, fh)

    def hang(path):
        probe(path)
        threading.Event().wait()

    def unwatched(_):
        return watchdog.active() is None

    def note_worker(_worker_id):
        with open(os.path.join(sys.argv[2], "loader.json"), "w") as fh:
            json.dump({"unwatched": watchdog.active() is None}, fh)

    if __name__ == "__main__":
        npu_runtime.install()
        ctx = mp.get_context(sys.argv[1])
        out = sys.argv[2]
        codes = {}
        for name, target in (("probe", probe), ("hang", hang)):
            p = ctx.Process(target=target, args=(os.path.join(out, name + ".json"),))
            p.start()
            p.join()                             # longer than the timeout for "hang": the parent lives
            codes[name] = p.exitcode
        # Waiting on library workers is not a sign of life (a hung one would hang the
        # parent for good): starting them under spawn takes longer than this short timeout.
        with watchdog.active().paused():
            with ctx.Pool(1) as pool:
                codes["pool_unwatched"] = pool.map(unwatched, [0])[0]
            loader = DataLoader(list(range(4)), batch_size=2, num_workers=1, worker_init_fn=note_worker,
                                multiprocessing_context=ctx)
            codes["batches"] = len(list(loader))
        print("CODES " + json.dumps(codes), flush=True)
""")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_process_workers_get_a_watchdog_and_library_workers_do_not(tmp_path, method):
    env = child_env(NPU_RUNTIME_WATCHDOG_TIMEOUT=str(TIMEOUT), NPU_RUNTIME_WATCHDOG_DIR=str(tmp_path))
    proc = run_script(tmp_path, PROCESS_JOB, method, tmp_path, env=env, timeout=240)
    # The parent itself finished, but a worker of it hung: the launcher must see a hang, not a success.
    assert proc.returncode == WATCHDOG_EXIT_CODE, proc.stderr
    codes = json.loads(next(ln[6:] for ln in proc.stdout.splitlines() if ln.startswith("CODES ")))
    assert codes == {"probe": 0, "hang": WATCHDOG_EXIT_CODE, "pool_unwatched": True, "batches": 2}
    for name in ("probe", "hang"):
        assert json.loads((tmp_path / f"{name}.json").read_text()) == {"child": "process", "watchdog": True}
    assert json.loads((tmp_path / "loader.json").read_text()) == {"unwatched": True}
