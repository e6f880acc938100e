"""``.set_epoch(`` calls in Python text and in the statements an edit inserts: what the
sampler rules (NPU501, NPU502) and the engine's last look at NPU502's findings share."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.records import Edit

SET_EPOCH = re.compile(r"\.\s*set_epoch\s*\(")


def adds_set_epoch(edit: Edit) -> bool:
    """An edit that inserts a ``.set_epoch(`` call (NPU501's, NPU502's, NPU510/511's)."""
    code = cst.Module([]).code_for_node
    return any(SET_EPOCH.search(code(statement)) for statement in (*edit.before, *edit.after))
