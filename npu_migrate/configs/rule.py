"""The base class of the config-file rules (``rules/configs/``).

A config rule sees every string scalar of a YAML, JSON or TOML file through the
same neutral view (:class:`npu_migrate.configs.document.Scalar`: its value, the
keys above it, whether it is a key itself), whatever the format, in document
order: ``visit_scalar(scalar)``, then ``leave_file()``. It never changes the
file; it records

* ``self.replace(scalar, new_value, message)``: the scalar's new value, written
  with the scalar's own quoting (only for ``scalar.editable`` scalars);
* ``self.report(scalar, message, suggestion)``: a finding on the scalar's line.

``triggers`` are byte strings of which a file must contain at least one for the
rule to run: a file without any is not parsed at all. The documented examples
are YAML (``config.yaml``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from npu_migrate.pipeline.rulebase import Example, RuleBase

if TYPE_CHECKING:
    from npu_migrate.configs.document import Scalar
    from npu_migrate.configs.engine import ConfigFile

__all__ = ["ConfigRule", "Example"]


class ConfigRule(RuleBase):
    front_end: ClassVar[str] = "config"
    triggers: ClassVar[Sequence[bytes]] = ()

    def __init__(self, file: ConfigFile) -> None:
        self.file = file

    @classmethod
    def triggered(cls, data: bytes) -> bool:
        return any(t in data for t in cls.triggers)

    def visit_scalar(self, scalar: Scalar) -> None:
        """Called for every string scalar (values and keys), in document order."""

    def leave_file(self) -> None:
        """Called once after every scalar was visited."""

    def replace(self, scalar: Scalar, value: str, message: str, reason: str | None = None) -> None:
        self.file.recorder.replace(scalar.start, scalar.end, scalar.render(value), self.id, message, reason=reason)

    def report(self, scalar: Scalar, message: str, suggestion: str) -> None:
        self.file.recorder.report(scalar.start, self.id, message, suggestion, self.file.statement(scalar))
