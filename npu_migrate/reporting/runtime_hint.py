"""The summary's one line on getting npu-runtime (issue 37.1).

Whenever a run makes migrated code import ``npu_runtime`` (NPU701) or declares
``npu-runtime==X`` (NPU854, NPU862, NPU812), or finds it undeclared (NPU854), the
summary says, in one line, how many files import it and how to get it: ``pip install
npu-runtime==X`` (X: the version this npu-migrate was released with, the same as its
own), or ``--vendor-runtime DIR`` where the package index lacks it. Which file got the
declaration is the summary's other line (:func:`npu_migrate.reporting.text.runtime_line`).
Nothing is said when the run vendors the runtime (``--vendor-runtime``, or a copy an
earlier run vendored): then no dependency is added.
"""

from __future__ import annotations

from npu_migrate.reporting.report import Report

#: The rules whose work means the migrated code needs npu-runtime.
_IMPORTING_RULES = frozenset({"NPU701"})


def install_hint(report: Report) -> str | None:
    from npu_migrate.pipeline import declared, runtime_bundle

    if report.runtime_vendored:
        return None
    rules = {item.rule for r in report.results for item in (*r.fixes, *r.findings)}
    if not rules & (_IMPORTING_RULES | declared.DECLARING_RULES):
        return None
    importers = 0
    for result in report.results:
        if result.error is None and result.path.endswith(".py"):
            source = declared.source_of(result)
            importers += source is not None and declared.IMPORTS_RUNTIME.search(source) is not None
    try:
        version = runtime_bundle.version()
    except runtime_bundle.BundleMissing:
        return None
    who = f"imported by {importers} migrated file(s)" if importers else "declared by the migration"
    return (f"npu-runtime {version} is {who}: install it with `pip install npu-runtime=={version}`, "
            f"or vendor it with `--vendor-runtime DIR` where your index lacks it")
