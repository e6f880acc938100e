"""Exceptions raised by npu_runtime.

Every error about the launch environment or a ranktable is a ``LaunchError`` so a
caller can catch one type; the message always names the variable or the file and
field at fault.
"""

from __future__ import annotations


class LaunchError(ValueError):
    """The launch environment or ranktable is malformed or inconsistent."""


class RanktableError(LaunchError):
    """A ranktable file is missing, malformed, not ready, or does not list this host."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or restored."""
