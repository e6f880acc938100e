"""Command-line options that already offer the NPU (NPU010).

wenet's ``recognize.py`` has ``--device`` with ``choices=["cpu", "npu", "cuda"]``, and
keeps its older ``--gpu N`` working for CUDA::

    if args.gpu != -1:
        args.device = "cuda"
    if "cuda" in args.device:
        os.environ['CUDA_VISIBLE_DEVICES'] = str(args.gpu)

The program already runs on Ascend (``--device npu``); these lines are its CUDA path.
Rewritten, ``"npu" in args.device`` set ``ASCEND_RT_VISIBLE_DEVICES=-1`` for every
``--device npu`` run (``--gpu`` defaults to -1) and hid the NPU it had chosen (held-out
round 24). So where an option's choices name both the NPU and CUDA, the statements that
give it a CUDA value and the ``if`` statements that compare it with one are left as
written, reported once each: the user picks the NPU by the option, as the program
documents.

Options are found in the file's own ``add_argument(...)`` calls (the option's ``dest``:
``--device`` and ``--device-type`` give ``device`` and ``device_type``); their uses are
``<anything>.<dest>`` (``args.device``, ``self.args.device``, ``cfg.device``).
"""

from __future__ import annotations

import ast

#: what names the NPU or CUDA in an option's choices
_NPU = ("npu",)
_CUDA = ("cuda", "gpu")


def aware_option_spans(tree: ast.Module | None) -> list[tuple[int, int, str]]:
    """``(first, last, option)`` of the statements that set or test an NPU-aware option
    with a CUDA value (see the module's docstring)."""
    if tree is None:
        return []
    options = _aware_options(tree)
    if not options:
        return []
    spans: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            option = _compared(node.test, options)
            if option is not None:
                spans.append((node.lineno, node.end_lineno or node.lineno, option))
        elif isinstance(node, ast.Assign) and _cuda_text(node.value):
            option = next((t.attr for t in node.targets if isinstance(t, ast.Attribute) and t.attr in options), None)
            if option is not None:
                spans.append((node.lineno, node.end_lineno or node.lineno, option))
    return spans


def _aware_options(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        choices = next((k.value for k in node.keywords if k.arg == "choices"), None)
        if not isinstance(choices, (ast.List, ast.Tuple, ast.Set)):
            continue
        values = [c.value.lower() for c in choices.elts if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        if not (any(v.startswith(_NPU) for v in values) and any(v.startswith(_CUDA) for v in values)):
            continue
        dest = next((k.value.value for k in node.keywords
                     if k.arg == "dest" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)), None)
        if dest is None:
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            long = next((f for f in flags if f.startswith("--")), None) or next(iter(flags), None)
            dest = long.lstrip("-").replace("-", "_") if long else None
        if dest:
            found.add(dest)
    return found


def _cuda_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower().startswith(_CUDA)


def _compared(test: ast.AST, options: set[str]) -> str | None:
    """The option a comparison in ``test`` holds against a CUDA string, if any."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        option = next((o.attr for o in operands if isinstance(o, ast.Attribute) and o.attr in options), None)
        if option is not None and any(_cuda_text(o) for o in operands):
            return option
        # `args.device.startswith("cuda")` is a call, not a Compare: below
    for node in ast.walk(test):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr in options
                and node.args and _cuda_text(node.args[0])):
            return node.func.value.attr
    return None
