"""The exit class of a rank that dies of an uncaught exception.

A Python traceback exits 1, which says nothing to a launcher: an out-of-memory error
would be retried until the restarts run out, an ECC error would be retried on the same
node. Under ``install()`` an uncaught exception in the main thread is printed as usual
and then matched against ``diagnose``'s signature table (its type, message and chained
exceptions, as they would appear in the log); when the root cause has an exit class,
the process exits with it instead of 1:

- 78 ``FATAL`` (out of memory, an operator or aicore error, CANN/driver not set, an
  ``nccl`` backend): a restart as it is fails the same way, and the launchers stop;
- 77 ``HARDWARE`` (uncorrectable ECC, a lost device or link, a failed remote rank): a
  restart on another node helps, and the launchers restart.

Anything else keeps exit 1 (unclassified: the launchers retry a bounded number of
times).

Classifying never delays the exit by more than about ``BUDGET_S`` (1 s): the text of each
exception is cut to its first ``LINE_KEEP`` and last ``TEXT_MAX`` characters before it is
split into lines, each line is cut to its first and last ``LINE_KEEP`` characters (4 KiB
each), only the last ``TEXT_MAX`` characters (64 KiB) of the whole text are matched, and
the matching runs on a daemon thread that the dying rank waits for at most ``BUDGET_S``;
past it the crash is unclassified (exit 1, "unknown") and one line says so. A 50 MB
exception message is classified from its bounded excerpt in well under a second. One
line on the ``npu_runtime`` logger says which signature decided. A
``KeyboardInterrupt`` and ``SystemExit`` are left alone; workers of
``torch.multiprocessing.spawn`` report their exception to the parent, which raises it
there, so the parent is the one classified.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import traceback
from typing import Any

from . import exitcodes

log = logging.getLogger("npu_runtime")

CLASSIFIED = (exitcodes.HARDWARE, exitcodes.FATAL)
MAX_CHAIN = 8
#: each line is matched on its first and last LINE_KEEP characters
LINE_KEEP = 4096
#: at most this many characters of the exception text (its end: the root cause) are matched
TEXT_MAX = 64 * 1024
#: the longest the classification may delay the exit (seconds)
BUDGET_S = 1.0

_lock = threading.Lock()
_previous_hook: Any = None
_code: int | None = None


def install() -> None:
    """Wrap ``sys.excepthook`` (once per process) and arrange the exit class at exit."""
    global _previous_hook
    with _lock:
        if _previous_hook is not None:
            return
        _previous_hook = sys.excepthook
        sys.excepthook = _hook
        atexit.register(_exit_with_class)


def exception_text(exc: BaseException) -> list[str]:
    """The lines a traceback prints for ``exc`` and the exceptions chained to it (their
    type and message; the frames say nothing about the class)."""
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < MAX_CHAIN:
        seen.add(id(current))
        for chunk in traceback.format_exception_only(type(current), current):
            lines.extend(_cut(line) for line in _excerpt(chunk).splitlines())
        current = current.__cause__ or current.__context__
    return _tail(lines)


def _excerpt(chunk: str) -> str:
    """``chunk`` cut to its first LINE_KEEP and last TEXT_MAX characters before it is split
    into lines: 50 MB of short lines would otherwise be a list of 25 million strings
    (about 1 s, the whole budget, spent before any matching)."""
    if len(chunk) <= LINE_KEEP + TEXT_MAX:
        return chunk
    return f"{chunk[:LINE_KEEP]} ...\n... {chunk[-TEXT_MAX:]}"


def _cut(line: str) -> str:
    if len(line) <= 2 * LINE_KEEP:
        return line
    return f"{line[:LINE_KEEP]} ... {line[-LINE_KEEP:]}"


def _tail(lines: list[str]) -> list[str]:
    """The last lines that fit in TEXT_MAX characters."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > TEXT_MAX:
            break
        kept.append(line)
    kept.reverse()
    return kept


def classify(exc: BaseException) -> tuple[int, Any] | None:
    """(exit class, diagnosis) when the exception's root cause has a class the launchers
    act on, else None."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    from .diagnose import diagnose_lines

    text = exception_text(exc)
    for diagnosis in diagnose_lines([("<exception>", text)]):
        if diagnosis.signature.severity != "error":
            continue
        code = diagnosis.signature.exit_class
        return (code, diagnosis) if code in CLASSIFIED else None
    return None


def classify_within(exc: BaseException, budget_s: float | None = None) -> tuple[int, Any] | None:
    """:func:`classify` on a daemon thread, waited for at most ``budget_s`` (BUDGET_S);
    None ("unknown") when it takes longer or fails."""
    budget_s = BUDGET_S if budget_s is None else budget_s
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(classify(exc))
        except Exception:  # noqa: BLE001 - never hide the script's own error behind ours
            box.append(None)

    thread = threading.Thread(target=run, name="npu_runtime-crash-class", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no threads any more (interpreter shutdown)
        return None
    thread.join(budget_s)
    if not box:
        log.error("npu_runtime: classifying the exception took over %g s; left unclassified (exit 1)", budget_s)
        return None
    return box[0]


def _hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    global _code
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    try:
        from . import diagnose  # noqa: F401 - imported here, not inside the budget

        found = classify_within(exc)
    except Exception:  # noqa: BLE001 - never hide the script's own error behind ours
        return
    if found is None:
        return
    code, diagnosis = found
    _code = code
    s = diagnosis.signature
    then = "a restart on another node can help" if code == exitcodes.HARDWARE else "a restart as it is fails the same way"
    log.error("npu_runtime: the script died of %s [%s]; exiting with %d (%s): %s. %s", s.cause, s.id, code,
              exitcodes.NAMES[code], then, s.action)


def _exit_with_class() -> None:
    if _code is not None:
        from .children import exit_now

        exit_now(_code)


def _reset_for_tests() -> None:
    global _previous_hook, _code
    with _lock:
        if _previous_hook is not None:
            sys.excepthook = _previous_hook
            atexit.unregister(_exit_with_class)
        _previous_hook = None
        _code = None
