"""Exit codes that say why a rank ended, so a launcher can decide whether to restart.

A rank that the runtime ends on purpose exits with one of these codes. The launchers
and job specs that ``npu-migrate launch`` writes read the code (and, where they can,
``python -m npu_runtime.diagnose`` on the rank's log) before they restart a job:

=====  ==================  =========================================================
code   class               restart?
=====  ==================  =========================================================
75     ``HANG``            yes: the watchdog saw no sign of life (EX_TEMPFAIL)
76     ``HEALTH``          yes, from the last good checkpoint: a NaN/Inf loss with
                           ``NPU_RUNTIME_HEALTH_ACTION=stop``
77     ``HARDWARE``        yes, on another node: a diagnosed device fault (ECC, a
                           device that lost its link)
78     ``FATAL``           no: a restart as it is fails the same way (out of memory,
                           an operator error, a configuration error) (EX_CONFIG)
=====  ==================  =========================================================

Under ``install()`` a rank that dies of an uncaught exception exits 77 or 78 when
``diagnose``'s table classifies it (``crash_class.py``). Any other non-zero code is ``UNKNOWN``: the launchers restart it a bounded number of
times, as they did before these classes existed.
"""

from __future__ import annotations

HANG = 75
HEALTH = 76
HARDWARE = 77
FATAL = 78

#: The codes after which an automatic restart can help.
RESTARTABLE = frozenset({HANG, HEALTH, HARDWARE})

NAMES = {HANG: "hang", HEALTH: "health", HARDWARE: "hardware", FATAL: "fatal"}


def restart_helps(code: int) -> bool:
    """Whether restarting after a rank exited with ``code`` can help.

    Codes outside the runtime's classes (a Python traceback exits 1) count as
    unknown failures, which the launchers retry a bounded number of times.
    """
    return code != FATAL and code != 0
