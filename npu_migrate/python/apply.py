"""Apply the edits that rules recorded, in one transform over the original tree."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import libcst as cst

from npu_migrate.python.comments import follow_rewrites
from npu_migrate.python.records import Edit


class EditApplier(cst.CSTTransformer):
    """Replacements are applied on leave, innermost first, so a rule that rewrites
    a call keeps the argument another rule rewrote (replacements given as
    functions of the updated node compose). Insertions splice statements around
    their anchor statement.

    ``path``, when given, holds every edited node and all its ancestors: the
    transform does not descend anywhere else, so only the nodes on the way to an
    edit are rebuilt instead of the whole tree.
    """

    def __init__(self, edits: Iterable[Edit], path: set[cst.CSTNode] | None = None) -> None:
        super().__init__()
        self.path = path
        self.replacements: dict[cst.CSTNode, list] = defaultdict(list)
        self.before: dict[cst.CSTNode, list[cst.BaseStatement]] = defaultdict(list)
        self.after: dict[cst.CSTNode, list[cst.BaseStatement]] = defaultdict(list)
        for edit in sorted(edits, key=lambda e: (not e.first, e.rule)):
            if edit.replacement is not None:
                self.replacements[edit.node].append(edit.replacement)
            self.before[edit.node].extend(edit.before)
            self.after[edit.node].extend(edit.after)

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.path is None or node in self.path

    def on_leave(self, original_node, updated_node):
        for replacement in self.replacements.get(original_node, ()):
            updated_node = replacement(updated_node) if callable(replacement) else replacement
            if isinstance(updated_node, cst.RemovalSentinel):  # an import nothing uses any more
                break
        if isinstance(original_node, cst.SimpleStatementLine) and isinstance(updated_node, cst.SimpleStatementLine) \
                and updated_node is not original_node and original_node.trailing_whitespace.comment is not None:
            # a comment that lists the old values follows the rewrite (npu_migrate/python/comments.py)
            updated_node = follow_rewrites(original_node, updated_node)
        if isinstance(original_node, cst.FormattedString) and updated_node is not original_node:
            updated_node = _quotes_fit(updated_node)
        before = self.before.get(original_node)
        after = self.after.get(original_node)
        if after and _is_import_line(original_node) and not _is_import_line(after[0]) and not after[0].leading_lines:
            # code right after the import block: one blank line first, as isort/ruff (I001) want
            after = [after[0].with_changes(leading_lines=(cst.EmptyLine(),)), *after[1:]]
        if before or after:
            kept = () if isinstance(updated_node, cst.RemovalSentinel) else (updated_node,)
            return cst.FlattenSentinel([*(before or ()), *kept, *(after or ())])
        return updated_node


class _OtherQuote(cst.CSTTransformer):
    """Strings inside one f-string's replacement fields written with ``quote`` get the
    other quote: before Python 3.12 an f-string cannot hold its own quote character in
    a field (VAR's ``print(f'...{torch.backends.cudnn.allow_tf32}')`` became a syntax error
    on 3.11 once NPU601 wrote ``hasattr(torch.npu, 'conv')`` there). Nested f-strings are
    fitted on their own leave."""

    def __init__(self, quote: str) -> None:
        super().__init__()
        self.quote = quote
        self.other = '"' if quote == "'" else "'"

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        return False

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        value = updated_node.value
        prefix = len(value) - len(value.lstrip("rRbBuU"))
        body = value[prefix:]
        if body[:1] != self.quote or body[:3] == self.quote * 3:
            return updated_node
        inner = body[1:-1]
        if self.other in inner or "\\" in inner:
            return updated_node  # (cannot be requoted as it is; rare in generated code)
        return updated_node.with_changes(value=value[:prefix] + self.other + inner + self.other)


def _quotes_fit(node: cst.FormattedString) -> cst.FormattedString:
    """``node`` with the strings its replacement fields hold requoted where they use the
    f-string's own (single-character) quote."""
    quote = node.start.lstrip("fFrRbB")
    if quote not in ("'", '"'):
        return node  # triple-quoted: a field may hold either quote
    fixer = _OtherQuote(quote)
    parts = [part.with_changes(expression=part.expression.visit(fixer))
             if isinstance(part, cst.FormattedStringExpression) else part for part in node.parts]
    return node.with_changes(parts=parts)


def _is_import_line(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body
    )
