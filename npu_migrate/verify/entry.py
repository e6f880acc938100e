"""The program each twin runs: ``python -m npu_migrate.verify.entry SCRIPT ARGS...``
(under torchrun for ``--nproc`` > 1). It boots the hooks in this process and in the
processes the script starts itself (npu_migrate/verify/spawned.py, which boots
npu_migrate/verify/hook.py), then runs SCRIPT as ``__main__`` and records how it ended.

Only the recorder's state matters across modules, and it lives in ``hook``, which is
imported once under its own name; this module may run as ``__main__``.
"""

from __future__ import annotations

import os
import runpy
import sys

from npu_migrate.verify import hook, spawned


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m npu_migrate.verify.entry SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script, args = argv[0], argv[1:]
    recorder = spawned.boot()
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    return hook.record(recorder, lambda: runpy.run_path(script, run_name="__main__"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
