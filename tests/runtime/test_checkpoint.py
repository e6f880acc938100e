"""CheckpointManager in-process behaviour: contents, atomic layout, fallback past bad ones."""

import json
import logging
import os
import random

import numpy as np
import pytest
import torch
from npu_runtime import CheckpointError, CheckpointManager, resume_batches
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


@pytest.mark.parametrize("background", [True, False])
def test_roundtrip_restores_everything(tmp_path, background):
    model, opt, sched, scaler = _objects()
    _train(model, opt, sched, scaler)
    gen = torch.Generator().manual_seed(99)
    torch.randn(3, generator=gen)
    mgr = CheckpointManager(tmp_path, keep=2, background=background)
    random.seed(5), np.random.seed(6), torch.manual_seed(7)
    mgr.save(3, model=model, optimizer=opt, scheduler=sched, scaler=scaler, data_gen=gen,
             epoch=1, batch_in_epoch=2, best_loss=0.25)
    mgr.wait()
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
    mgr.wait()
    assert [s for s, _ in mgr.checkpoints()] == [30, 20]
    assert (tmp_path / LATEST).read_text().strip() == step_dirname(30)
    manifest = json.loads((tmp_path / step_dirname(30) / MANIFEST).read_text())
    assert manifest["step"] == 30 and manifest["files"][STATE_FILE]["size"] > 0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


def test_resave_same_step_replaces(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path, keep=3, background=False)
    mgr.save(5, model=model, note="first")
    mgr.save(5, model=model, note="second")
    assert CheckpointManager(tmp_path).load_latest(model=model).extra == {"note": "second"}


def test_unwraps_ddp_and_compiled_prefixes(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        inner = torch.nn.Linear(2, 2)
        ddp = torch.nn.parallel.DistributedDataParallel(inner)
        mgr = CheckpointManager(tmp_path, background=False)
        mgr.save(1, model=ddp)
        payload = torch.load(tmp_path / step_dirname(1) / STATE_FILE, weights_only=True)
        assert sorted(payload["states"]["model"]) == ["bias", "weight"]
        plain = torch.nn.Linear(2, 2)
        mgr.load_latest(model=plain)  # loads into an unwrapped module too
        assert torch.equal(plain.weight, inner.weight)
    finally:
        dist.destroy_process_group()


def _three(tmp_path):
    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path, keep=5, background=False)
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
    mgr = CheckpointManager(tmp_path, background=False)
    mgr.save(1, model=model, when=np.float64(1.5))  # numpy scalars are refused by weights_only
    with pytest.raises(CheckpointError, match="weights_only"):
        mgr.load_latest(model=model)


def test_background_error_surfaces_on_wait(tmp_path, monkeypatch):
    from npu_runtime import checkpoint

    model, *_ = _objects()
    mgr = CheckpointManager(tmp_path)
    mgr.save(1, model=model)
    mgr.wait()

    def broken(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "_crc32_file", broken)
    mgr.save(2, model=model)  # returns: the failure happens on the finalizing thread
    with pytest.raises(CheckpointError, match="No space left"):
        mgr.wait()
    monkeypatch.undo()
    assert [s for s, _ in mgr.checkpoints()] == [1]
    assert CheckpointManager(tmp_path).load_latest(model=model).step == 1


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
