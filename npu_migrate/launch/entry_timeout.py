"""The collective timeout an entry script asks for: ``init_process_group(timeout=...)``.

HCCL has its own timeouts (``HCCL_CONNECT_TIMEOUT`` for link setup, ``HCCL_EXEC_TIMEOUT``
for a collective), so a script that raised torch's timeout to wait for slow steps
would still be cut off by HCCL's defaults. The launchers take their HCCL timeouts from
it where the script says, as a ``timedelta`` with literal numbers
(``timedelta(minutes=60)``, ``datetime.timedelta(seconds=5400)``, ``timedelta(0, 3600)``);
a module-level constant bound once to such a ``timedelta`` (``TIMEOUT = timedelta(hours=2)``
... ``timeout=TIMEOUT``) counts too; anything computed at run time is left alone (the
launchers keep their defaults).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

_UNITS = {"days": 86400.0, "seconds": 1.0, "microseconds": 1e-6, "milliseconds": 1e-3, "minutes": 60.0,
          "hours": 3600.0, "weeks": 604800.0}
_POSITIONAL = ("days", "seconds", "microseconds", "milliseconds", "minutes", "hours", "weeks")
_INIT = m.Call(func=m.Name("init_process_group") | m.Attribute(attr=m.Name("init_process_group")))
_TIMEDELTA = m.Call(func=m.Name("timedelta") | m.Attribute(attr=m.Name("timedelta")))


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        a, b = _number(node.left), _number(node.right)
        return a * b if a is not None and b is not None else None
    return None


def _seconds(call: cst.Call) -> float | None:
    total = 0.0
    for index, arg in enumerate(call.args):
        name = arg.keyword.value if arg.keyword is not None else (_POSITIONAL[index] if index < 7 else None)
        value = _number(arg.value)
        if name not in _UNITS or value is None or arg.star:
            return None
        total += value * _UNITS[name]
    return total if total > 0 else None


def init_timeout(path: Path, shown: str) -> tuple[float, str] | None:
    """(seconds, ``"file:line"``) of the first ``init_process_group(timeout=timedelta(...))``
    with literal numbers in ``path``; None when there is none or the file does not parse."""
    try:
        source = path.read_bytes()
        if b"init_process_group" not in source:
            return None
        wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
    except (OSError, cst.ParserSyntaxError, UnicodeDecodeError):
        return None
    positions = wrapper.resolve(PositionProvider)
    constants = _module_timedeltas(wrapper.module)
    for call in m.findall(wrapper.module, _INIT):
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value != "timeout":
                continue
            value = constants.get(arg.value.value) if isinstance(arg.value, cst.Name) else arg.value
            if value is not None and m.matches(value, _TIMEDELTA):
                seconds = _seconds(value)
                if seconds is not None:
                    return seconds, f"{shown}:{positions[call].start.line}"
    return None


def _module_timedeltas(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """Names bound exactly once in the whole file, at module level, to a ``timedelta(...)`` call."""
    bindings: dict[str, int] = {}
    for node in m.findall(module, m.AssignTarget(target=m.Name()) | m.AnnAssign(target=m.Name())
                          | m.AugAssign(target=m.Name())):
        bindings[node.target.value] = bindings.get(node.target.value, 0) + 1
    constants = {}
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and bindings.get(small.targets[0].target.value) == 1 and m.matches(small.value, _TIMEDELTA)):
                constants[small.targets[0].target.value] = small.value
    return constants
