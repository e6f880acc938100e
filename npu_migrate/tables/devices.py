"""Device strings and the keys that hold them, for every front end.

``cuda`` / ``cuda:N`` become ``npu`` / ``npu:N``. Which *names* hold a device
(an argparse option ``--device``, a config key ``eval_device``, a Hydra override
``trainer.device=``) is decided by the same word patterns the Python rules use
for variable and parameter names (``rules/device/_device_strings.py``).
"""

from __future__ import annotations

import re

#: Words that name a device: ``device``, ``*_device``, ``dev``, ``map_location``...
DEVICE_WORD = re.compile(r"device|(?:^|_)dev(?:$|_)|map_location", re.IGNORECASE)
#: ...unless the name says it holds something else about devices (a count, ids, a name).
NOT_A_DEVICE = re.compile(
    r"count|(?:^|_)n(?:um)?_|_ids?$|_idx$|_index$|_indices$|capab|_name$|_names$|_rank$|_map$|mesh",
    re.IGNORECASE,
)

#: The whole value is a CUDA device: ``cuda``, ``cuda:0``; the index may be a shell
#: expansion or placeholder (``cuda:$LOCAL_RANK``, ``cuda:${RANK}``, ``cuda:{}``).
CUDA_DEVICE = re.compile(r"cuda(?::(?:\d+|\$\w+|\$\{\w+\}|\{\w*\}))?")


def is_device_key(name: str) -> bool:
    """``device``, ``--device``, ``train.eval_device``, ``MODEL.DEVICE``, ``device_type``;
    not ``device_count``, ``num_devices``, ``device_ids``, ``devices``."""
    key = name.lstrip("-+").replace("-", "_").rsplit(".", 1)[-1]
    if key.lower().endswith("devices"):
        return False
    return bool(DEVICE_WORD.search(key)) and not NOT_A_DEVICE.search(key)


def npu_device(value: str) -> str | None:
    """``npu:1`` for ``cuda:1`` (the same index text), None if ``value`` is not a CUDA device."""
    if CUDA_DEVICE.fullmatch(value) is None:
        return None
    return "npu" + value[len("cuda") :]
