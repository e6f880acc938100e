"""CheckpointManager in-process behaviour: contents, atomic layout, fallback past bad ones,
pruning that never gives up a good checkpoint, failures reported as CheckpointError."""

import errno
import json
import logging
import os
import random
import threading

import numpy as np
import pytest
import torch

# Before any process group exists (docs/e2e.md, "Exit aborts"): DDP imports it otherwise,
# and its `group=group.WORLD` defaults then pin the default group past destroy.
import torch.distributed.nn
from npu_runtime import (
    CheckpointError,
    CheckpointManager,
    SaveHandle,
    durable,
    layout,
    resume_batches,
)
from npu_runtime.checkpoint import LATEST, MANIFEST, STATE_FILE, step_dirname


def _objects(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    return model, opt, sched, scaler


def _train(model, opt, sched, scaler, n=3):
    for _ in range(n):
        loss = model(torch.randn(5, 4)).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        opt.zero_grad()


@pytest.mark.parametrize("background", [False, True], ids=["save", "async_save"])
def test_roundtrip_restores_everything(tmp_path, background):
    model, opt, sched, scaler = _objects()
    _train(model, opt, sched, scaler)
    gen = torch.Generator().manual_seed(99)
    torch.randn(3, generator=gen)
    mgr = CheckpointManager(tmp_path, keep=2)
    random.seed(5), np.random.seed(6), torch.manual_seed(7)
    objects = {"model": model, "optimizer": opt, "scheduler": sched, "scaler": scaler, "data_gen": gen,
                   "epoch": 1, "batch_in_epoch": 2, "best_loss": 0.25}
    if background:
        handle = mgr.async_save(3, **objects)
        assert isinstance(handle, SaveHandle)
        assert handle.wait() == str(tmp_path / step_dirname(3))
    else:
        assert mgr.save(3, **objects) == str(tmp_path / step_dirname(3))
    expect_rng = (random.random(), float(np.random.rand()), torch.rand(1).item())
    expect_gen = torch.randn(3, generator=gen)

    m2, o2, s2, sc2 = _objects(seed=1)
    gen2 = torch.Generator().manual_seed(0)
    rp = CheckpointManager(tmp_path).load_latest(model=m2, optimizer=o2, scheduler=s2, scaler=sc2, data_gen=gen2)
    assert (rp.step, rp.epoch, rp.batch_in_epoch, rp.extra) == (3, 1, 2, {"best_loss": 0.25})
    assert (random.random(), float(np.random.rand()), torch.rand(1).item()) == expect_rng
    assert torch.equal(torch.randn(3, generator=gen2), expect_gen)
    for a, b in zip(model.state_dict().values(), m2.state_dict().values()):
        assert torch.equal(a, b)
    assert s2.state_dict() == sched.state_dict() and sc2.state_dict() == scaler.state_dict()
    st_a, st_b = opt.state_dict()["state"], o2.state_dict()["state"]
    assert all(torch.equal(st_a[k]["exp_avg"], st_b[k]["exp_avg"]) for k in st_a)


def test_layout_pointer_and_pruning(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path, keep=2)
    for step in (10, 20, 30):
        mgr.save(step, model=model)
    mgr.wait()  # old checkpoints are removed in the background
    assert [s for s, _ in mgr.checkpoints()] == [30, 20]
    assert (tmp_path / LATEST).read_text().strip() == step_dirname(30)
    manifest = json.loads((tmp_path / step_dirname(30) / MANIFEST).read_text())
    assert manifest["step"] == 30 and manifest["files"][STATE_FILE]["size"] > 0
    # torch.save's zip records carry a crc32 each: the data is not read back to checksum it.
    assert manifest["files"][STATE_FILE]["check"] == durable.ZIP_CRC
    assert not [p for p in os.listdir(tmp_path) if p.startswith((".tmp", ".trash"))]


def test_resave_same_step_replaces(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path, keep=3)
    mgr.save(5, model=model, note="first")
    mgr.save(5, model=model, note="second")
    assert CheckpointManager(tmp_path).load_latest(model=model).extra == {"note": "second"}
    mgr.wait()
    assert sorted(set(os.listdir(tmp_path)) - {layout.LOCK}) == [LATEST, step_dirname(5)]


def test_unwraps_ddp_and_compiled_prefixes(tmp_path):
    import gc

    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        inner = torch.nn.Linear(2, 2)
        ddp = torch.nn.parallel.DistributedDataParallel(inner)
        mgr = CheckpointManager(tmp_path)
        mgr.save(1, model=ddp)
        payload = torch.load(tmp_path / step_dirname(1) / STATE_FILE, weights_only=True)
        assert sorted(payload["states"]["model"]) == ["bias", "weight"]
        plain = torch.nn.Linear(2, 2)
        mgr.load_latest(model=plain)  # loads into an unwrapped module too
        assert torch.equal(plain.weight, inner.weight)
        compiled = torch.compile(inner, backend="eager")  # ._orig_mod, never called: nothing compiles
        mgr.save(2, model=compiled)
        payload = torch.load(tmp_path / step_dirname(2) / STATE_FILE, weights_only=True)
        assert sorted(payload["states"]["model"]) == ["bias", "weight"]
    finally:
        # Teardown order (docs/e2e.md, "Exit aborts"): drop DDP (its reducer holds the
        # group) before destroying the group, so destroy_process_group frees the group
        # from Python with the GIL released, instead of DDP's reducer freeing it later
        # with the GIL held while gloo's threads need it to finish.
        ddp = None
        gc.collect()
        dist.destroy_process_group()


def _three(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path, keep=5)
    for step in (1, 2, 3):
        mgr.save(step, model=model)
    return mgr, model


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_manifest", "garbage_manifest", "empty_state"])
def test_corrupt_newest_is_skipped(tmp_path, caplog, damage):
    _mgr, model = _three(tmp_path)
    newest = tmp_path / step_dirname(3)
    state = newest / STATE_FILE
    data = bytearray(state.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
        state.write_bytes(bytes(data))
    elif damage == "truncate":
        state.write_bytes(bytes(data[: len(data) // 3]))
    elif damage == "no_manifest":
        (newest / MANIFEST).unlink()
    elif damage == "garbage_manifest":
        (newest / MANIFEST).write_text("{not json")
    elif damage == "empty_state":
        state.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="npu_runtime"):
        rp = CheckpointManager(tmp_path).load_latest(model=model)
    assert rp.step == 2
    assert "skipping checkpoint step 3" in caplog.text


def test_flip_is_caught_only_by_the_checksum(tmp_path):
    """torch.load alone accepts a flipped payload byte; the manifest crc must catch it."""
    _mgr, model = _three(tmp_path)
    state = tmp_path / step_dirname(3) / STATE_FILE
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x40
    state.write_bytes(bytes(data))
    torch.load(state, weights_only=True)  # no error from torch itself
    assert CheckpointManager(tmp_path, verify=False).load_latest(model=model).step == 3
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 2


def test_nothing_valid_means_fresh_start(tmp_path):
    model, *_ = _objects()
    assert CheckpointManager(tmp_path).load_latest(model=model) is None
    (tmp_path / step_dirname(4)).mkdir()
    assert CheckpointManager(tmp_path).load_latest(model=model) is None


def test_unsafe_extra_value_fails_loudly_instead_of_skipping(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model=model, when=np.float64(1.5))  # numpy scalars are refused by weights_only
    with pytest.raises(CheckpointError, match="weights_only"):
        mgr.load_latest(model=model)


def test_background_error_surfaces_on_wait(tmp_path, monkeypatch):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model=model)

    def broken(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(durable, "write_text", broken)  # the manifest, written on the thread
    handle = mgr.async_save(2, model=model)  # returns: the failure happens on the finishing thread
    with pytest.raises(CheckpointError, match="disk is full"):
        handle.wait()
    monkeypatch.undo()
    mgr.wait()  # the handle already reported it: not raised again
    assert [s for s, _ in mgr.checkpoints()] == [1]
    assert not [p for p in os.listdir(tmp_path) if p.startswith((".tmp", ".trash"))]
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 1


def test_pruning_never_gives_up_good_checkpoints_for_corrupt_ones(tmp_path):
    """keep=2 with the two newest checkpoints corrupt: new good saves must stay."""
    model, *_ = _objects()
    first = CheckpointManager(tmp_path, keep=2)
    for step in (20, 30):
        first.save(step, model=model)
    for step in (20, 30):
        state = tmp_path / step_dirname(step) / STATE_FILE
        data = bytearray(state.read_bytes())
        data[len(data) // 2] ^= 0x40
        state.write_bytes(bytes(data))
    mgr = CheckpointManager(tmp_path, keep=2)
    assert mgr.load_latest(model=model) is None  # both corrupt: a fresh start
    mgr.save(5, model=model)
    mgr.save(15, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [30, 20, 15, 5]  # the corrupt ones do not count
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 15
    mgr.save(40, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [40, 30, 20, 15]  # 5 goes: 40 and 15 are the two good ones
    mgr.save(50, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [50, 40]


def test_unverified_checkpoints_from_an_earlier_run_do_not_count(tmp_path):
    model, *_ = _objects()
    earlier = CheckpointManager(tmp_path, keep=3)
    for step in (1, 2, 3):
        earlier.save(step, model=model)
    mgr = CheckpointManager(tmp_path, keep=2)  # a restart that never called load_latest
    mgr.save(4, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [4, 3, 2, 1]
    mgr.save(5, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [5, 4]


def _rewrite_manifest(path, change):
    manifest = json.loads((path / MANIFEST).read_text())
    change(manifest)
    (path / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("change", [
    lambda m: m["files"].__setitem__(STATE_FILE, 5),
    lambda m: m["files"].__setitem__(STATE_FILE, [1, 2]),
    lambda m: m["files"][STATE_FILE].__setitem__("size", "1234"),
    lambda m: m["files"][STATE_FILE].__setitem__("size", None),
    lambda m: m["files"][STATE_FILE].pop("check"),
    lambda m: m["files"][STATE_FILE].__setitem__("crc32", "0"),
    lambda m: m["files"].__setitem__("../../etc/passwd", {"size": 1, "crc32": 1}),
    lambda m: m.__setitem__("files", [STATE_FILE]),
    lambda m: m.__setitem__("files", {}),
    lambda m: m.__setitem__("step", "3"),
    lambda m: m.__setitem__("step", 2),
    lambda m: m.clear(),
], ids=["entry-int", "entry-list", "size-str", "size-null", "no-check", "crc-str", "escaping-path",
        "files-list", "files-empty", "step-str", "step-other", "empty"])
def test_malformed_manifest_falls_back(tmp_path, caplog, change):
    _mgr, model = _three(tmp_path)
    _rewrite_manifest(tmp_path / step_dirname(3), change)
    with caplog.at_level(logging.WARNING, logger="npu_runtime"):
        rp = CheckpointManager(tmp_path).load_latest(model=model)
    assert rp.step == 2
    assert "skipping checkpoint step 3" in caplog.text


def _full_disk_after(monkeypatch, limit):
    """os.write fails with ENOSPC once ``limit`` bytes went through it."""
    real, written = os.write, [0]

    def write(fd, data):
        if written[0] + len(data) > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written[0] += len(data)
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_full_disk_is_a_checkpoint_error_and_leaves_nothing_behind(tmp_path, monkeypatch):
    model = torch.nn.Linear(256, 256)
    mgr = CheckpointManager(tmp_path, keep=3)
    mgr.save(1, model=model)
    _full_disk_after(monkeypatch, 64 * 1024)
    for step in (2, 3, 4):  # every failed save cleans up after itself
        with pytest.raises(CheckpointError, match=r"checkpoint step \d could not be written to .*: the disk is full"):
            mgr.save(step, model=model)
        mgr.wait()
        assert sorted(set(os.listdir(tmp_path)) - {layout.LOCK}) == [LATEST, step_dirname(1)]
    monkeypatch.undo()
    assert mgr.latest_pointer() == step_dirname(1)
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 1
    mgr.save(5, model=model)
    assert [s for s, _ in mgr.checkpoints()] == [5, 1]


def test_a_durable_save_flushes_while_torch_save_writes(tmp_path, monkeypatch):
    """The data reaches the disk as it is written (fdatasync on the state file before it is
    closed), so that save() waits for the tail only; async_save() does not flush while
    writing (it returns as soon as the bytes are written).

    Robust to load: once a flush is due, the writer waits (up to 60 s) for the flusher
    thread's fdatasync before writing on, so a busy machine cannot finish torch.save
    before the thread is scheduled. A writer that does not flush while writing never
    sets the event: the wait runs out and the assertions below fail."""
    flushed_open: list[int] = []
    flushed = threading.Event()
    real = os.fdatasync

    def fdatasync(fd):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == STATE_FILE:
            flushed_open.append(os.fstat(fd).st_size)
            flushed.set()
        return real(fd)

    pacing = {"on": True, "waited": False}
    write = durable.DurableWriter.write

    def paced_write(self, data):
        written = write(self, data)
        if pacing["on"] and not pacing["waited"] and self.size >= durable.FLUSH_EVERY and self._flush_every:
            pacing["waited"] = True
            flushed.wait(timeout=60)
        return written

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(durable, "FLUSH_EVERY", 1 << 20)
    monkeypatch.setattr(durable.DurableWriter, "write", paced_write)
    model = torch.nn.Linear(1024, 1024)  # 4 MB of weights
    CheckpointManager(tmp_path / "sync").save(1, model=model)
    size = os.path.getsize(tmp_path / "sync" / step_dirname(1) / STATE_FILE)
    assert pacing["waited"]
    assert len(flushed_open) >= 2 and min(flushed_open) < size  # flushed part-way, and at the end
    flushed_open.clear()
    pacing["on"] = False
    mgr = CheckpointManager(tmp_path / "async")
    handle = mgr.async_save(1, model=model)
    handle.wait()
    assert flushed_open == [size]  # one flush, after writing


def test_a_failed_background_flush_fails_the_save(tmp_path, monkeypatch):
    """After a failed fdatasync the kernel may report success the next time: the error of
    the flush made while writing must fail the save itself."""
    real = os.fdatasync
    calls = [0]

    def fdatasync(fd):
        calls[0] += 1
        if calls[0] == 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd)

    model = torch.nn.Linear(1024, 1024)
    mgr = CheckpointManager(tmp_path, keep=3)
    mgr.save(1, model=model)
    monkeypatch.setattr(durable, "FLUSH_EVERY", 1 << 20)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with pytest.raises(CheckpointError, match=r"checkpoint step 2 could not be written to .*Input/output error"):
        mgr.save(2, model=model)
    monkeypatch.undo()
    mgr.wait()
    assert sorted(set(os.listdir(tmp_path)) - {layout.LOCK}) == [LATEST, step_dirname(1)]
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 1


def test_failure_messages_name_the_cause(tmp_path):
    full = durable.write_failure(OSError(errno.ENOSPC, "x"), "checkpoint step 7", str(tmp_path))
    assert "checkpoint step 7 could not be written to" in str(full) and "the disk is full" in str(full)
    quota = durable.write_failure(OSError(errno.EDQUOT, "x"), "checkpoint step 7", str(tmp_path))
    assert "disk quota" in str(quota)
    big = durable.write_failure(OSError(errno.EFBIG, "x"), "checkpoint step 7", str(tmp_path))
    assert "file-size limit" in str(big)
    wrapped = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")
    wrapped.__context__ = OSError(errno.ENOSPC, "x")
    assert "the disk is full" in str(durable.write_failure(wrapped, "checkpoint step 7", str(tmp_path)))


def test_loaders_always_see_the_newest_returned_save(tmp_path, monkeypatch):
    """Before and after every rename or deletion a sequence of saves makes (re-saving a
    step included), a loader started at that moment finds the newest save that has
    returned, or one newer: a kill at any moment loses nothing that save() returned."""
    import shutil

    model = torch.nn.Linear(8, 8)
    mgr = CheckpointManager(tmp_path, keep=2)
    returned: list[tuple[int, int]] = []
    checks = [0]
    failures: list[str] = []  # checks also run on the pruning threads, beside the next save

    def check():
        checks[0] += 1
        rp = CheckpointManager(tmp_path, keep=2).load_latest()
        if returned:
            newest = returned[-1]
            if rp is None or (rp.step, rp.extra["n"]) < newest:
                failures.append(f"{None if rp is None else (rp.step, rp.extra['n'])} < {newest}")
                raise AssertionError(failures[-1])

    def watched(fn):
        def call(*args, **kwargs):
            check()
            try:
                return fn(*args, **kwargs)
            finally:
                check()
        return call

    for name in ("replace", "rename", "remove", "rmdir"):
        monkeypatch.setattr(os, name, watched(getattr(os, name)))
    monkeypatch.setattr(shutil, "rmtree", watched(shutil.rmtree))
    for n, step in enumerate([1, 2, 3, 3, 4, 4, 5]):
        mgr.save(step, model=model, n=n)
        returned.append((step, n))
    # The pruned checkpoints go on background threads that call the watched rmtree, whose
    # check() restores the global RNG from a checkpoint: let them finish inside this test,
    # or one of them resets the RNG in the middle of the next test.
    layout.settle()
    assert checks[0] > 30
    assert not failures


def test_a_checkpoint_renamed_while_it_is_loaded_is_found_under_its_new_name(tmp_path, monkeypatch):
    """Another process re-saves step 4: its new copy, published as ``step-4.1``, is renamed
    to ``step-4`` while this process reads it. Loading lists the directory again and finds
    it there, instead of falling back to step 3."""
    model = torch.nn.Linear(8, 8)
    mgr = CheckpointManager(tmp_path)
    mgr.save(3, model=model, n=3)
    mgr.save(4, model=model, n=4)
    os.rename(tmp_path / step_dirname(4), tmp_path / step_dirname(4, 1))  # the interim name
    real = CheckpointManager.verify_dir
    renamed = []

    def verify_dir(self, path, **kwargs):
        if path.endswith(step_dirname(4, 1)) and not renamed:
            renamed.append(path)
            os.rename(path, tmp_path / step_dirname(4))  # the other process's last rename
        return real(self, path, **kwargs)

    monkeypatch.setattr(CheckpointManager, "verify_dir", verify_dir)
    rp = CheckpointManager(tmp_path).load_latest(model=model)
    assert renamed and (rp.step, rp.extra["n"]) == (4, 4)


def test_resume_batches_skips_without_touching_rng():
    def data():
        for i in range(6):
            yield i, torch.rand(1).item()  # loading draws from the global RNG

    torch.manual_seed(0)
    straight = list(data())
    torch.manual_seed(0)
    it = data()
    [next(it) for _ in range(2)]
    at_save = torch.get_rng_state()  # what a checkpoint after 2 batches holds

    torch.set_rng_state(at_save)
    assert list(resume_batches(data(), 2)) == straight[2:]
    torch.set_rng_state(at_save)
    naive = list(data())[2:]
    assert naive != straight[2:]  # skipping without restoring the RNG would drift
    assert list(resume_batches(range(3), 5)) == []
    assert list(resume_batches(range(3), 0)) == [0, 1, 2]
