"""Run selected rules on a snippet (shared by the family unit tests)."""

from __future__ import annotations

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source


def run(source: str, *rules: str):
    settings = Settings(selection=Selection.create([*rules, "NPU100"]))
    result = migrate_source("snippet.py", source.encode(), settings)
    assert result.error is None, result.error
    out = result.new_source.decode() if result.new_source is not None else source
    again = migrate_source("snippet.py", out.encode(), settings)
    assert again.new_source is None, "a second run changed the file again"
    return out, result.findings
