"""``torch_npu.profiler.schedule``: which steps are skipped, warmed up and recorded."""

from __future__ import annotations

import enum


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """Skip ``skip_first`` steps, then cycle through ``wait`` idle steps, ``warmup``
    warm-up steps and ``active`` recorded steps (the last one saves), ``repeat``
    times (0: forever). ``skip_first_wait`` drops the first cycle's idle steps.
    torch_npu's parameter order (``wait, active, warmup``) differs from
    torch.profiler.schedule's keyword-only one; the keywords are the same."""

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0,
                 skip_first: int = 0, skip_first_wait: int = 0) -> None:
        for name, value in (("wait", wait), ("warmup", warmup), ("repeat", repeat),
                            ("skip_first", skip_first), ("skip_first_wait", skip_first_wait)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"schedule: {name} must be an int >= 0, got {value!r}")
        if not isinstance(active, int) or active < 1:
            raise ValueError(f"schedule: active must be an int >= 1, got {active!r}")
        self.wait, self.active, self.warmup = wait, active, warmup
        self.repeat, self.skip_first, self.skip_first_wait = repeat, skip_first, skip_first_wait

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"schedule: step must be >= 0, got {step}")
        if step < self.skip_first:
            return ProfilerAction.NONE
        position = step - self.skip_first + (self.wait if self.skip_first_wait else 0)
        cycle = self.wait + self.warmup + self.active
        if self.repeat and position // cycle >= self.repeat:
            return ProfilerAction.NONE
        phase = position % cycle
        if phase < self.wait:
            return ProfilerAction.NONE
        if phase < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if phase == cycle - 1 else ProfilerAction.RECORD


def record_everything(step: int) -> ProfilerAction:
    """Without a schedule the profiler records from start() to stop()."""
    return ProfilerAction.RECORD
