"""``torch.npu.random`` of the emulated NPU.

The emulated device draws random numbers on CPU: its default generator is
torch's CPU default generator, shared by every emulated device, so a seeded npu
run draws what a seeded CPU run draws, and saving and restoring the npu state
saves and restores that generator.
"""

from __future__ import annotations

import torch

from ._device_index import _check_index, _get_device_index

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]


def _device_index(device) -> int:
    return _check_index(_get_device_index(device))


def _device_count() -> int:
    return int(torch.ops.npu_emu.device_count())


def manual_seed(seed) -> None:
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed) -> None:
    torch.default_generator.manual_seed(int(seed))


def seed() -> None:
    torch.default_generator.seed()


def seed_all() -> None:
    torch.default_generator.seed()


def initial_seed() -> int:
    return torch.default_generator.initial_seed()


def get_rng_state(device="npu") -> torch.Tensor:
    _device_index(device)
    return torch.default_generator.get_state()


def set_rng_state(new_state: torch.Tensor, device="npu") -> None:
    _device_index(device)
    torch.default_generator.set_state(new_state.clone().cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
