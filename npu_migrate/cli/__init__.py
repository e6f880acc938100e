"""The command line: the click application (``app.py``), what ``npu-migrate PATH...``
does once parsed (``command.py``, ``stdin.py`` for ``-``), option resolution
(``options.py``), diff printing (``output.py``), ``explain`` and ``--vendor-runtime``.

It sits on top: it uses the pipeline (``npu_migrate/pipeline/``), the front ends and
the reports; nothing below imports it. See docs/layout.md.
"""

from npu_migrate.cli.app import console, main

__all__ = ["console", "main"]
