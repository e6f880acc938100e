"""What every rule declares, whatever front end runs it: its id, name, summary,
rationale and examples (the documentation ``npu-migrate rules`` prints and the
test suite runs), and which front end it belongs to.

The Python rules (``npu_migrate/python/rule.py``, libcst visitors) and the rules
of the other front ends (``npu_migrate/shell/rule.py``, ...) all derive from
:class:`RuleBase`; ``npu_migrate/pipeline/registry.py`` finds them. Nothing here imports
a parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Example:
    before: str
    after: str | None = None  # None: must be left exactly as it is
    #: Other rules selected together with this one when the example is checked.
    also: tuple[str, ...] = ()


class RuleBase:
    id: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    rationale: ClassVar[str] = ""
    examples: ClassVar[Sequence[Example]] = ()
    #: True when the rule rewrites code; False for rules that only report.
    fixable: ClassVar[bool] = True
    #: Runs only when its exact code is selected (``--extend-select NPU511``), never
    #: through a prefix or ``ALL``: for transformations that change what a program
    #: does, which the user must ask for (see npu_migrate/pipeline/selection.py).
    opt_in: ClassVar[bool] = False
    #: The front end that runs the rule: a :class:`npu_migrate.pipeline.filetypes.FileType` name.
    front_end: ClassVar[str] = "python"
    #: The migration targets the rule knows (npu_migrate/pipeline/target.py): the CPU only
    #: where it writes the CPU spelling too (``npu-migrate verify``'s reference twin).
    targets: ClassVar[tuple[str, ...]] = ("npu",)
    #: What a finding of this rule means for a team lead (the readiness summary, the
    #: reports' severity): ``blocking``, the code cannot train on NPU until a person
    #: acts (a CUDA-only package, an API without an NPU counterpart, a CUDA build in the
    #: requirements); ``review`` (the default), a person should look; ``informational``,
    #: left alone on purpose and right as it is (NPU010, NPU011).
    impact: ClassVar[str] = "review"


IMPACTS = ("blocking", "review", "informational")


class FileRule(RuleBase):
    """Base of the rules of the front ends that edit bytes (shell, Dockerfile...):
    they visit one file (``self.file``, the front end's view of it), and a file
    that contains none of their ``triggers`` (byte strings) is not parsed for them."""

    triggers: ClassVar[Sequence[bytes]] = ()

    def __init__(self, file) -> None:
        self.file = file

    @classmethod
    def triggered(cls, data: bytes) -> bool:
        return any(t in data for t in cls.triggers)

    def leave_file(self) -> None:
        """Called once after the walk, for decisions that need the whole file."""


def rule_doc(rule: type[RuleBase]) -> str:
    """The rule's documentation as markdown, for ``npu-migrate rules ID``."""
    from npu_migrate.pipeline.filetypes import named

    file_type = named(rule.front_end)
    fence = f"```{file_type.fence if file_type else ''}"
    what = f" ({file_type.name} files)" if file_type and file_type.name != "python" else ""
    parts = [f"# {rule.id} ({rule.name}){what}", "", rule.summary, ""]
    if rule.rationale:
        parts += [rule.rationale.strip(), ""]
    parts.append(f"Fix available: {'yes' if rule.fixable else 'no (reports a finding)'}")
    parts.append(f"Impact of a finding: {rule.impact}")
    if rule.opt_in:
        parts.append(
            f"Opt-in: runs only when selected by its exact code (`--extend-select {rule.id}`, "
            f"or `extend-select = [\"{rule.id}\"]` in `[tool.npu-migrate]`); prefixes and `ALL` do not enable it."
        )
    for example in rule.examples:
        parts += ["", "Example:" if example.after is not None else "Left unchanged:", fence, example.before.rstrip()]
        if example.after is not None:
            parts += ["```", "becomes", fence, example.after.rstrip()]
        parts.append("```")
    return "\n".join(parts) + "\n"
