"""Code that runs only on a torch older than the API its ``try`` already uses.

    try:
        return torch.is_autocast_enabled(x.device.type)   # torch 2.4 and later
    except TypeError:
        return torch.is_autocast_enabled()                # the fallback for older torch

The ``except`` body is a compatibility fallback: on a torch that has the device-explicit
(or ``torch.amp``) form, the ``try`` body runs and the fallback never does; on an older
torch, the fallback runs *because* that form is missing there. Rewriting the fallback into
that same form is therefore needless on a new torch and a crash on an old one (held-out
round 20, musubi-tuner's LoRA forward: ``torch.is_autocast_enabled("npu")`` raised the
TypeError again, uncaught). The AMP rules (NPU301, NPU302) leave such a fallback as it is
and report it with torch_npu's own spelling for an older torch.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

#: what a missing or older API raises; a bare ``except:`` and ``except Exception`` catch it too
_API_MISSING = frozenset({"TypeError", "AttributeError", "ImportError", "ModuleNotFoundError", "NameError",
                          "Exception", "BaseException"})


def _catches_missing_api(handler: cst.ExceptHandler) -> bool:
    caught = handler.type
    if caught is None:
        return True
    names = caught.elements if isinstance(caught, cst.Tuple) else [cst.Element(caught)]
    return any(isinstance(e.value, cst.Name) and e.value.value in _API_MISSING for e in names)


def _names_in(body: cst.CSTNode) -> set[str]:
    """Every identifier and attribute name the statements of ``body`` mention."""
    found: set[str] = set()

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    body.visit(Collect())
    return found


def in_version_fallback(ctx, node: cst.CSTNode, api: Iterable[str]) -> bool:
    """``node`` lies in the ``except`` body of a ``try`` whose own body already names one of
    ``api`` (the last names of the call before and after the rewrite: ``is_autocast_enabled``,
    ``get_autocast_gpu_dtype``/``get_autocast_dtype``, ``GradScaler``) and that catches what a
    missing or older API raises. Only the innermost handler counts, and not through a
    function or class defined inside it."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Try)):
            return False
        if isinstance(ancestor, cst.ExceptHandler):
            statement = ctx.parent(ancestor)
            return (isinstance(statement, cst.Try) and _catches_missing_api(ancestor)
                    and not _names_in(statement.body).isdisjoint(api))
    return False


FALLBACK_MESSAGE = (
    "in the `except` fallback of a `try` that already uses the newer API: left as it is (on a torch that has "
    "that API the `try` runs; on the older torch this fallback exists for, the rewrite would fail again here)"
)
