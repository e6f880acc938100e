"""Output formats, one module each: ``text`` (the default), ``grouped``, ``json``,
``sarif``, ``github``, ``gitlab`` and ``markdown`` (a readiness summary). Every format is made from a
:class:`~npu_migrate.reporting.report.Report`; :mod:`.relocate` moves positions to
the file as written, and :mod:`.sink` checks and writes ``--output-file`` and
``--report``.

Human formats (``text``, ``grouped``) print to a rich console; the others render
a string for stdout or a file.
"""

from __future__ import annotations

import importlib

HUMAN = ("text", "grouped")
MACHINE = {"json": "json_report", "sarif": "sarif", "github": "github", "gitlab": "gitlab", "markdown": "markdown"}
FORMATS = (*HUMAN, *MACHINE)


def render(name: str, report) -> str:
    """The report in a machine format."""
    return importlib.import_module(f"npu_migrate.reporting.{MACHINE[name]}").render(report)


def write_human(name: str, report, console) -> None:
    importlib.import_module(f"npu_migrate.reporting.{name}").write(report, console)
