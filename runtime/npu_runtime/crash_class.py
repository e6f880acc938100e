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
times). One line on the ``npu_runtime`` logger says which signature decided. A
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
            lines.extend(chunk.splitlines())
        current = current.__cause__ or current.__context__
    return lines


def classify(exc: BaseException) -> tuple[int, Any] | None:
    """(exit class, diagnosis) when the exception's root cause has a class the launchers
    act on, else None."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return None
    from .diagnose import diagnose_lines

    for diagnosis in diagnose_lines([("<exception>", exception_text(exc))]):
        if diagnosis.signature.severity != "error":
            continue
        code = diagnosis.signature.exit_class
        return (code, diagnosis) if code in CLASSIFIED else None
    return None


def _hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    global _code
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    try:
        found = classify(exc)
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
