"""``torch_npu.profiler.profile`` on the emulated NPU: torch_npu's step/schedule state
machine around torch's own (CPU) trace collection."""

from __future__ import annotations

import enum
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

import torch.profiler as _torch_profiler

from ._config import _ExperimentalConfig
from ._schedule import ProfilerAction, record_everything

#: the metrics torch_npu's export_stacks accepts (others fall back to CPU time)
_STACK_METRICS = ("self_cpu_time_total", "self_npu_time_total")


class ProfilerActivity(enum.Enum):
    """torch_npu's own activity enum (not torch.profiler's): CPU and NPU."""

    CPU = 0
    NPU = 1


def supported_activities() -> set[ProfilerActivity]:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


def tensorboard_trace_handler(dir_name: str | None = None, worker_name: str | None = None,
                              analyse_flag: bool = True, async_mode: bool = False) -> Callable:
    """Write each finished recording under ``dir_name`` in torch_npu's directory layout
    (``<worker>_<pid>_<YYYYmmddHHMMSSfff>_ascend_pt``); the trace is torch's CPU trace."""
    root = Path(dir_name or ".")

    def handler(prof: profile) -> None:
        stamp = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
        span = root / f"{worker_name or socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt"
        output = span / "ASCEND_PROFILER_OUTPUT"
        output.mkdir(parents=True, exist_ok=True)
        if analyse_flag:
            prof.export_chrome_trace(str(output / "trace_view.json"))

    return handler


class profile:
    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: _ExperimentalConfig | None = None,
                 execution_trace_observer=None, custom_trace_id_callback: Callable[[], str] | None = None,
                 use_cuda: bool | None = None) -> None:
        self.activities = set(activities) if activities else supported_activities()
        for activity in self.activities:
            if not isinstance(activity, ProfilerActivity):
                # torch.profiler.ProfilerActivity is another enum: torch_npu ignores it
                raise TypeError(f"torch_npu.profiler.profile: {activity!r} is not a torch_npu.profiler.ProfilerActivity")
        self.schedule = schedule if callable(schedule) else record_everything
        self.record_steps = callable(schedule)
        self.on_trace_ready = on_trace_ready
        self.experimental_config = experimental_config or _ExperimentalConfig()
        self.execution_trace_observer = execution_trace_observer
        self.custom_trace_id_callback = custom_trace_id_callback
        self._options = {"record_shapes": record_shapes, "profile_memory": profile_memory,
                         "with_stack": with_stack, "with_flops": with_flops, "with_modules": with_modules}
        self.metadata: dict[str, object] = {}
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.stopped = True
        self._session: _torch_profiler._KinetoProfile | None = None
        self._finished: _torch_profiler._KinetoProfile | None = None
        self._step_range = None
        self._recording = False

    # -- context manager / start / stop / step -------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()

    def start(self) -> None:
        self.stopped = False
        self._transit(ProfilerAction.NONE, self.current_action)
        self._enter_step()
        if self.execution_trace_observer:
            self.execution_trace_observer.start()

    def stop(self) -> None:
        self._exit_step()
        self._transit(self.current_action, None)
        self.stopped = True
        if self.execution_trace_observer:
            self.execution_trace_observer.stop()

    def step(self) -> None:
        if self.stopped:
            return  # torch_npu warns "Profiler is stopped, step takes no effect!"
        self._exit_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        self._enter_step()

    # -- results ---------------------------------------------------------------------

    def export_chrome_trace(self, output_path: str) -> None:
        if self._finished is not None:
            self._finished.export_chrome_trace(output_path)

    def export_stacks(self, output_path: str, metric: str = "self_cpu_time_total") -> None:
        if not self._options["with_stack"]:
            warnings.warn("Function export_stacks() requires with_stack=True.", stacklevel=2)  # as torch_npu
            return
        if self._finished is None:
            return
        # the emulated NPU computes on the CPU: its device time is CPU time
        self._finished.export_stacks(output_path, "self_cpu_time_total" if metric in _STACK_METRICS else metric)

    def export_memory_timeline(self, output_path: str, device: str | None = None) -> None:
        if self._finished is not None:
            self._finished.export_memory_timeline(output_path, device="cpu")

    def add_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def set_custom_trace_id_callback(self, callback: Callable[[], str]) -> None:
        self.custom_trace_id_callback = callback

    def get_trace_id(self) -> str:
        return self.custom_trace_id_callback() if self.custom_trace_id_callback else ""

    # -- the state machine ---------------------------------------------------------------

    def _enter_step(self) -> None:
        if self.record_steps:
            self._step_range = _torch_profiler.record_function(f"ProfilerStep#{self.step_num}")
            self._step_range.__enter__()

    def _exit_step(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def _transit(self, previous: ProfilerAction | None, current: ProfilerAction | None) -> None:
        """torch_npu's action table: leaving RECORD_AND_SAVE (or stopping while recording)
        saves and calls on_trace_ready; leaving a recording for NONE/WARMUP, or stopping
        in WARMUP, discards it."""
        record, save = ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE
        if previous == save or (previous == record and current is None):
            self._finish(save=True)
        elif (previous == record and current in (ProfilerAction.NONE, ProfilerAction.WARMUP)) or (
            previous == ProfilerAction.WARMUP and current in (ProfilerAction.NONE, None)
        ):
            self._finish(save=False)
        if current == ProfilerAction.WARMUP and self._session is None:
            self._open().prepare_trace()
        elif current in (record, save):
            if self._session is None:
                self._open().prepare_trace()
            if not self._recording:
                self._session.start_trace()
                self._recording = True

    def _open(self) -> _torch_profiler._KinetoProfile:
        self._session = _torch_profiler._KinetoProfile(activities=[_torch_profiler.ProfilerActivity.CPU],
                                                       **self._options)
        self._recording = False
        return self._session

    def _finish(self, save: bool) -> None:
        session, recording = self._session, self._recording
        self._session, self._recording = None, False
        if session is None:
            return
        if not recording:
            session.start_trace()  # a warm-up that never recorded: close it empty
        session.stop_trace()
        if recording:
            self._finished = session
        if save and recording and self.on_trace_ready is not None:
            self.on_trace_ready(self)
