"""Health events: NaN/Inf losses, loss spikes, slow steps and full memory, as JSON lines,
and NPU_RUNTIME_HEALTH_ACTION=stop ending the rank with exitcodes.HEALTH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from npu_runtime import exitcodes, health


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _monitor(tmp_path, clock=None, **env):
    exits: list[int] = []
    environ = {"NPU_RUNTIME_EVENTS": str(tmp_path / "events.jsonl"), "RANK": "3", **env}
    monitor = health.HealthMonitor(environ, clock=clock or Clock(), exit=exits.append)
    return monitor, exits


def _events(tmp_path):
    health._flush_at_exit()  # events are written by the sink's thread
    path = tmp_path / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _train(monitor, losses, clock=None, durations=None):
    """A loop: backward on each loss, then an optimizer step."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.0)
    monitor.start()
    try:
        for i, value in enumerate(losses):
            if clock is not None and durations is not None:
                clock.now += durations[i]
            loss = (param * 0).sum() + value
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        monitor.stop()


def test_nan_and_inf_losses_are_events_with_step_and_rank(tmp_path):
    monitor, exits = _monitor(tmp_path)
    _train(monitor, [1.0, 1.0, float("nan"), 1.0, float("inf")])
    events = _events(tmp_path)
    assert [(e["event"], e["step"], e["rank"], e["value"]) for e in events] == [
        ("nan_loss", 2, 3, "nan"), ("inf_loss", 4, 3, "inf")]
    assert exits == []  # warn is the default


def test_stop_exits_with_the_health_code_before_the_optimizer_applies_the_step(tmp_path):
    monitor, exits = _monitor(tmp_path, NPU_RUNTIME_HEALTH_ACTION="stop")
    param = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    monitor.start()
    try:
        (param * float("nan")).sum().backward()
        monitor._exit = lambda code: (exits.append(code), (_ for _ in ()).throw(SystemExit(code)))
        with pytest.raises(SystemExit):
            optimizer.step()
    finally:
        monitor.stop()
    assert exits == [exitcodes.HEALTH]
    assert torch.equal(param.detach(), torch.ones(1))  # the bad step was not applied


def test_a_loss_spike_against_the_running_median(tmp_path):
    monitor, _ = _monitor(tmp_path)
    _train(monitor, [1.0, 1.1, 0.9, 1.0, 1.05, 2.5, 9.0, 1.0])
    (spike,) = _events(tmp_path)
    assert spike["event"] == "loss_spike" and spike["step"] == 6 and spike["value"] == 9.0
    assert spike["threshold"] == pytest.approx(3.0 * 1.025, rel=1e-6)  # median of the six before


def test_spike_factor_is_configurable(tmp_path):
    monitor, _ = _monitor(tmp_path, NPU_RUNTIME_LOSS_SPIKE_FACTOR="2")
    _train(monitor, [1.0] * 5 + [2.5])
    assert [e["event"] for e in _events(tmp_path)] == ["loss_spike"]


def test_a_step_slower_than_twice_the_running_median(tmp_path):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock)
    durations = [0.0, 30.0] + [1.0] * 6 + [3.5, 1.0, 1.9]
    _train(monitor, [1.0] * len(durations), clock=clock, durations=durations)
    slow = [e for e in _events(tmp_path) if e["event"] == "slow_step"]
    # Step 1's 30 s (after the first step: compilation) lands before the window fills.
    assert [(e["step"], e["value"]) for e in slow] == [(8, 3.5)]
    assert slow[0]["threshold"] == pytest.approx(2.0)


def test_jitter_on_a_millisecond_step_is_no_slow_step(tmp_path):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock)
    # 5x by 4 ms, 30x by 29 ms, 2.2x by 10.5 ms (the 0.019 s > 0.017 s of issue 37): jitter on a
    # loaded CPU, under the absolute floor (0.5 s over the median); then a 0.6 s stall is an event
    durations = [0.0] + [0.001] * 8 + [0.005, 0.001, 0.030, 0.001, 0.0115, 0.001, 0.6]
    _train(monitor, [1.0] * len(durations), clock=clock, durations=durations)
    assert [e["step"] for e in _events(tmp_path) if e["event"] == "slow_step"] == [15]


def test_the_absolute_floor_is_a_setting(tmp_path):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock, NPU_RUNTIME_SLOW_STEP_MIN_S="0.02")
    durations = [0.0] + [0.001] * 8 + [0.005, 0.001, 0.030]
    _train(monitor, [1.0] * len(durations), clock=clock, durations=durations)
    assert [e["step"] for e in _events(tmp_path) if e["event"] == "slow_step"] == [11]


def _train_marked(monitor, clock, slow_at, mark):
    param = torch.nn.Parameter(torch.ones(2))
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD([param], lr=0.0)
    monitor.start()
    try:
        for step in range(12):
            loss = (param * 0).sum() + 1.0
            loss.backward()
            clock.now += 0.05
            if step == slow_at:
                mark(model, clock)
            optimizer.step()
            optimizer.zero_grad()
    finally:
        monitor.stop()


@pytest.mark.parametrize("how", ["phase", "model.eval()", "checkpoint"])
def test_an_interval_that_evaluates_or_checkpoints_is_no_slow_step(tmp_path, monkeypatch, how):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock)
    monkeypatch.setattr(health, "_active", monitor)

    def mark(model, clock):
        if how == "phase":
            with health.phase("eval"):
                clock.now += 5.0
        elif how == "model.eval()":  # nanoGPT's estimate_loss(): eval(), no_grad forwards, train()
            model.eval()
            clock.now += 5.0
            model.train()
        else:
            from npu_runtime import CheckpointManager

            CheckpointManager(tmp_path / "ckpt").save(1, model=model)
            clock.now += 5.0

    _train_marked(monitor, clock, 8, mark)
    assert [e for e in _events(tmp_path) if e["event"] == "slow_step"] == []
    # the interval after it is judged again, against a median the marked one did not move
    _train_marked(monitor, clock, 99, mark)
    assert monitor._durations.median() == pytest.approx(0.05)


def test_an_unmarked_stall_is_still_a_slow_step(tmp_path):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock)
    _train_marked(monitor, clock, 8, lambda model, clock: setattr(clock, "now", clock.now + 5.0))
    assert [e["step"] for e in _events(tmp_path) if e["event"] == "slow_step"] == [8]


def test_phase_without_a_monitor_is_a_no_op(monkeypatch):
    monkeypatch.setattr(health, "_active", None)
    with health.phase("eval"):
        pass
    import npu_runtime

    with npu_runtime.phase("checkpoint"):
        pass


def test_memory_above_threshold_once_per_crossing(tmp_path, monkeypatch):
    monitor, _ = _monitor(tmp_path)
    readings = iter([0.5, 0.96, 0.97, 0.5, 0.99])
    monkeypatch.setattr(monitor, "_memory_fraction", lambda: next(readings))
    for _ in range(5):
        monitor.check_memory()
        monitor.step += 1
    assert [(e["event"], e["step"]) for e in _events(tmp_path)] == [("memory_high", 1), ("memory_high", 4)]


def test_bad_settings_fall_back_to_defaults_with_a_warning(tmp_path, caplog):
    monitor, _ = _monitor(tmp_path, NPU_RUNTIME_HEALTH_ACTION="explode", NPU_RUNTIME_LOSS_SPIKE_FACTOR="nan",
                          NPU_RUNTIME_SLOW_STEP_FACTOR="1" + "0" * 5000)
    assert (monitor.action, monitor.spike_factor, monitor.slow_factor) == ("warn", 3.0, 2.0)
    assert "NPU_RUNTIME_HEALTH_ACTION" in caplog.text and "NPU_RUNTIME_LOSS_SPIKE_FACTOR" in caplog.text


def test_events_file_is_not_written_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    os.symlink(victim, tmp_path / "events.jsonl")
    monitor, _ = _monitor(tmp_path)
    monitor.emit("nan_loss", float("nan"), None)
    assert victim.read_text() == "keep\n"


def test_gradient_accumulation_checks_every_backward_with_one_event_per_step(tmp_path):
    monitor, exits = _monitor(tmp_path)
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.0)
    monitor.start()
    try:
        for step in range(3):
            for micro in range(4):  # four micro-batches per optimizer step, NaN in the third of step 1 ...
                bad = (step == 1 and micro == 2) or step == 2  # ... and in all four of step 2
                ((param * 0).sum() + (float("nan") if bad else 1.0)).backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        monitor.stop()
    assert [(e["event"], e["step"]) for e in _events(tmp_path)] == [("nan_loss", 1), ("nan_loss", 2)]


@pytest.mark.parametrize("how", ["vector-loss", "autograd-list", "activation"])
def test_nan_in_a_non_scalar_or_several_tensors_is_caught_before_the_step(tmp_path, how):
    monitor, exits = _monitor(tmp_path, NPU_RUNTIME_HEALTH_ACTION="stop")
    param = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([param], lr=1.0)
    monitor.start()
    try:
        per_sample = param * torch.tensor([1.0, float("nan"), 1.0, 1.0])
        if how == "vector-loss":
            per_sample.backward(torch.ones(4))
        elif how == "autograd-list":
            torch.autograd.backward([param.sum(), per_sample.mean()])
        else:  # a pipeline stage: backward on its output with the next stage's gradient
            torch.autograd.backward(per_sample * 2, grad_tensors=torch.ones(4))
        monitor._exit = lambda code: (exits.append(code), (_ for _ in ()).throw(SystemExit(code)))
        with pytest.raises(SystemExit):
            optimizer.step()
    finally:
        monitor.stop()
    assert exits == [exitcodes.HEALTH] and torch.equal(param.detach(), torch.ones(4))
    assert [e["event"] for e in _events(tmp_path)] == ["nan_loss"]


def test_non_scalar_tensors_are_not_losses_for_spikes(tmp_path):
    monitor, _ = _monitor(tmp_path)
    param = torch.nn.Parameter(torch.ones(1000))
    optimizer = torch.optim.SGD([param], lr=0.0)
    monitor.start()
    try:
        for step in range(12):
            (param * (100.0 if step == 10 else 1.0)).backward(torch.ones(1000))
            optimizer.step()
    finally:
        monitor.stop()
    assert _events(tmp_path) == []


def _scaled_loop(monitor, losses):
    """A GradScaler loop (CPU): scaler.scale(loss).backward(), scaler.step(opt), scaler.update()."""
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    monitor.start()
    try:
        for value in losses:
            scaler.scale((param * value).sum()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    finally:
        monitor.stop()
    return param, scaler


def test_a_step_the_grad_scaler_skips_is_an_overflow_event_never_a_stop(tmp_path):
    monitor, exits = _monitor(tmp_path, NPU_RUNTIME_HEALTH_ACTION="stop")
    param, scaler = _scaled_loop(monitor, [1.0, 1.0, float("inf"), 1.0, float("nan"), 1.0])
    assert exits == [] and torch.isfinite(param).all()
    assert [(e["event"], e["step"], e["value"]) for e in _events(tmp_path)] == [
        ("overflow_skipped", 2, "inf"), ("overflow_skipped", 3, "nan")]  # steps count applied steps
    assert monitor.step == 4 and scaler.get_scale() == 2.0 ** 14


def test_a_loss_that_stays_nan_under_the_grad_scaler_stops_after_the_limit(tmp_path):
    monitor, exits = _monitor(tmp_path, NPU_RUNTIME_HEALTH_ACTION="stop", NPU_RUNTIME_OVERFLOW_LIMIT="4")
    _scaled_loop(monitor, [1.0, 1.0] + [float("nan")] * 5)
    events = [(e["event"], e["threshold"]) for e in _events(tmp_path)]
    assert events[:5] == [("overflow_skipped", None)] * 4 + [("nan_loss", 4)]
    assert exits[:1] == [exitcodes.HEALTH]


def test_the_skipped_step_is_no_slow_step(tmp_path):
    clock = Clock()
    monitor, _ = _monitor(tmp_path, clock=clock)
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    monitor.start()
    try:
        for i in range(12):
            clock.now += 1.0
            scaler.scale((param * (float("inf") if i == 8 else 1.0)).sum()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    finally:
        monitor.stop()
    assert [e["event"] for e in _events(tmp_path)] == ["overflow_skipped"]


def test_a_loop_without_optimizer_steps_does_not_hold_its_losses(tmp_path):
    monitor, _ = _monitor(tmp_path)
    param = torch.nn.Parameter(torch.ones(2))
    monitor.start()
    try:
        for i in range(health.MAX_PENDING * 3):
            ((param * 0).sum() + (float("nan") if i == 5 else 1.0)).backward()
            assert len(monitor._pending) <= health.MAX_PENDING
    finally:
        monitor.stop()
    assert [e["event"] for e in _events(tmp_path)] == ["nan_loss"]


def test_the_monitor_restores_grad_scaler_step(tmp_path):
    original = torch.amp.GradScaler.step
    monitor, _ = _monitor(tmp_path)
    monitor.start()
    assert torch.amp.GradScaler.step is not original
    monitor.stop()
    assert torch.amp.GradScaler.step is original


def test_the_monitor_restores_backward(tmp_path):
    original = torch.autograd.backward
    monitor, _ = _monitor(tmp_path)
    monitor.start()
    assert torch.autograd.backward is not original
    monitor.stop()
    assert torch.autograd.backward is original


SCRIPT = textwrap.dedent("""
    import os, sys, time
    import torch
    import npu_runtime
    npu_runtime.install()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 4)
    last = time.perf_counter()
    for step in range(12):
        loss = model(x).pow(2).mean()
        if step == int(os.environ.get("NAN_AT", "-1")):
            loss = loss * float("nan")
        if step == int(os.environ.get("SLOW_AT", "-1")):
            time.sleep(1.5)  # a stall well over the absolute floor (0.5 s over the median)
        else:
            time.sleep(0.05)
        loss.backward()
        opt.step()
        opt.zero_grad()
        now = time.perf_counter()
        print(f"step_time {step} {now - last:.6f}")  # the wall-clock interval the monitor times too
        last = now
    print("finished")
""")


def _run(tmp_path, **env):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    environ = {**os.environ, "NPU_RUNTIME_EVENTS": str(tmp_path / "events.jsonl"), "NPU_RUNTIME_WATCHDOG": "0",
               **env}
    return subprocess.run([sys.executable, str(script)], env=environ, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(150)
def test_install_watches_an_unchanged_script_and_stop_exits_76(tmp_path):
    done = _run(tmp_path, NAN_AT="5", NPU_RUNTIME_HEALTH_ACTION="stop")
    assert done.returncode == exitcodes.HEALTH, done.stderr
    assert "finished" not in done.stdout
    assert "nan loss at step 5" in done.stderr
    (event,) = _events(tmp_path)
    assert (event["event"], event["step"], event["rank"]) == ("nan_loss", 5, 0)


@pytest.mark.timeout(150)
def test_install_reports_a_slow_step_and_trains_on(tmp_path):
    done = _run(tmp_path, SLOW_AT="9")
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr
    slow = {e["step"]: e for e in _events(tmp_path) if e["event"] == "slow_step"}
    assert 9 in slow and slow[9]["value"] >= 1.5, slow
    # Any other step reported must really have been slow: on a loaded machine a 50 ms step
    # can take longer than twice the median (a pass of three runtime suites at once saw
    # step 11 reported). A step the script itself timed at under 2 x 50 ms never is.
    times = {int(step): float(seconds) for _, step, seconds in
             (line.split() for line in done.stdout.splitlines() if line.startswith("step_time "))}
    assert len(times) == 12, done.stdout
    for step in set(slow) - {9}:
        assert times[step] > 0.1, (step, times[step], slow[step])


@pytest.mark.timeout(150)
def test_health_can_be_switched_off(tmp_path):
    done = _run(tmp_path, NAN_AT="2", NPU_RUNTIME_HEALTH="0", NPU_RUNTIME_HEALTH_ACTION="stop")
    assert done.returncode == 0, done.stderr
    assert _events(tmp_path) == []


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=120),
       st.integers(min_value=1, max_value=60))
def test_the_running_window_median_is_the_median_of_the_last_values(values, size):
    import statistics

    window = health.RunningWindow(size)
    for i, value in enumerate(values):
        window.append(value)
        assert window.median() == statistics.median(values[max(0, i + 1 - size):i + 1])


# ---------------------------------------------------------------- the events file never stops training
NAN_SCRIPT = textwrap.dedent("""
    import time
    import torch
    import npu_runtime
    npu_runtime.install()
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(8, 4)
    start = time.monotonic()
    for step in range(20):
        loss = model(x).pow(2).mean() * float("nan")  # an event every step
        loss.backward()
        opt.step()
        opt.zero_grad()
    print(f"finished in {time.monotonic() - start:.2f} s", flush=True)
""")


def _hostile_target(tmp_path, kind):
    if kind == "/dev/full":
        return "/dev/full"
    target = tmp_path / "events"
    if kind == "fifo without reader":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "dangling symlink":
        target.symlink_to(tmp_path / "nowhere" / "events.jsonl")
    return str(target)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["/dev/full", "fifo without reader", "directory", "dangling symlink"])
def test_an_unwritable_events_file_is_one_warning_and_training_finishes(tmp_path, kind):
    script = tmp_path / "train.py"
    script.write_text(NAN_SCRIPT)
    env = {**os.environ, "NPU_RUNTIME_EVENTS": _hostile_target(tmp_path, kind), "NPU_RUNTIME_WATCHDOG_TIMEOUT": "20",
           "NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT": "20"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=100,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "finished" in done.stdout
    assert done.stderr.count("cannot write events to") == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.count("nan loss at step") == 20  # every event is still logged


def test_a_write_that_hangs_never_blocks_the_caller(tmp_path, monkeypatch, caplog):
    import threading
    import time

    release = threading.Event()
    sink = health.EventSink(str(tmp_path / "events.jsonl"))
    monkeypatch.setattr(health, "WRITE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(sink, "_write", lambda data: release.wait(30))  # a hung NFS mount
    start = time.monotonic()
    sink.put("one\n")
    time.sleep(0.5)
    for _ in range(5000):  # far more than the queue holds
        sink.put("more\n")
    assert time.monotonic() - start < 5
    assert sink.broken is not None and sink.dropped >= 5000
    assert sink.flush(0.1) is False  # bounded: the hung write is not waited for
    assert caplog.text.count("cannot write events to") == 1
    release.set()


def test_a_full_queue_drops_lines_instead_of_waiting(tmp_path, monkeypatch):
    release = __import__("threading").Event()
    sink = health.EventSink(str(tmp_path / "events.jsonl"))
    monkeypatch.setattr(sink, "_write", lambda data: release.wait(30))
    for _ in range(health.QUEUE_MAX + 10):
        sink.put("x\n")
    assert sink.dropped >= 9
    release.set()


def test_a_reading_fifo_gets_the_events(tmp_path):
    import threading

    fifo = tmp_path / "events"
    os.mkfifo(fifo)
    got: list[str] = []

    def read():
        with open(fifo) as fh:
            got.extend(fh.readline() for _ in range(2))

    reader = threading.Thread(target=read)
    reader.start()
    import time

    time.sleep(0.3)  # the reader has opened its end
    sink = health.EventSink(str(fifo))
    sink.put("a\n")
    sink.put("b\n")
    assert sink.flush(5)
    reader.join(10)
    assert got == ["a\n", "b\n"] and sink.broken is None
