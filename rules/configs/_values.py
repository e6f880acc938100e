"""Shared by the config rules: which name holds a value.

A scalar says what it holds through the key above it (``device: cuda``), through
a ``name=value`` of its own (Hydra overrides such as ``trainer.device=cuda`` in
``.hydra/overrides.yaml``, ``--device=cuda`` in an argument list) or, in an
argument list (VS Code's ``launch.json`` ``args``, a job spec's ``command``),
through the option just before it (``["--device", "cuda"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from npu_migrate.configs.document import Scalar

_ASSIGNMENT = re.compile(r"(-{0,2}[A-Za-z_][\w.\-]*)=(\S+)")
_OPTION = re.compile(r"--?[A-Za-z][\w\-]*")


@dataclass(frozen=True)
class Setting:
    #: The name that holds the value (a key, an option), if any.
    name: str | None
    #: The value's text and where it starts in the scalar's value.
    value: str
    offset: int

    def replaced(self, scalar: Scalar, new: str) -> str:
        """The scalar's whole new value with this setting's value replaced by ``new``."""
        end = self.offset + len(self.value)
        return scalar.value[: self.offset] + new + scalar.value[end:]


def setting(scalar: Scalar, previous: Scalar | None) -> Setting:
    """What ``scalar`` (a value, not a key) sets. ``previous`` is the scalar before it."""
    match = _ASSIGNMENT.fullmatch(scalar.value)
    if match is not None:
        return Setting(match.group(1), match.group(2), match.start(2))
    if (
        previous is not None
        and not previous.is_key
        and previous.keys == scalar.keys
        and _OPTION.fullmatch(previous.value)
    ):
        return Setting(previous.value, scalar.value, 0)  # ["--device", "cuda"]
    return Setting(scalar.key, scalar.value, 0)
