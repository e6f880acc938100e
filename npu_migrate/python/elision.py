"""Parses only the functions and classes a rule can act on.

Parsing with libcst, the batched rule pass and the metadata all cost in
proportion to the code parsed, and in a file that passes the prefilter most
functions and methods still never mention CUDA (a model file with one
``torch.cuda.is_available()``). So before libcst sees a file, CPython's own
parser (``ast``, several times faster) gives the extent of every top-level
function and class and of every method of a top-level class, and each one that
no needed rule can act on is replaced by a one-line placeholder::

    pass  # __npu_migrate_elided_3__

libcst parses that reduced module; the rules run and the edits are applied on
it; then every placeholder line is swapped back for the original bytes of its
definition, which were never parsed and cannot have changed. Positions are
mapped back to the original lines.

A definition is kept (parsed) when any of these holds:

* it contains a local trigger of a rule the prefilter found needed
  (:meth:`Rule.local_words`: by default the rule's trigger words), or spells
  one of its ``local_names`` (``torch.load``, or ``th.load`` after ``import
  torch as th``: every import of the file counts);
* it mentions a name that a module-level import or assignment binds to
  something containing such a trigger (``from torch.cuda import amp as A``
  binds ``A``; ``DEV = "cuda"`` binds ``DEV``), followed to a fixed point,
  because rules follow names from their binding to their uses. For an
  assignment only the code counts: identifiers and strings without spaces, not
  a docstring-like string that mentions CUDA in prose;
* it contains ``global`` (it may rebind a module-level name) or imports one of
  the watched packages (the import table is file-wide);
* it is a function that the file calls with an argument holding a trigger
  (``_test_model_1device("cuda")``): the analysis reads its parameters' uses.

Module-level statements other than definitions are always kept, as are class
bodies apart from their methods. A rule whose decisions need the whole file
(``whole_file = True``) turns elision off for the files it may act on, and so
does ``--no-prefilter``: ``bench/prefilter_proof.py`` compares the two on the
whole corpus and requires identical results.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from npu_migrate.python.names import WATCHED_PACKAGES
from npu_migrate.python.prefilter import word_pattern

_BYTE_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_TEXT_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_INDENT = re.compile(rb"[ \t\f]*")
_PLACEHOLDER = re.compile(rb"[ \t\f]*pass  # __npu_migrate_elided_(\d+)__(?:\r\n|\r|\n)?")
_ALWAYS_KEEP = re.compile(r"\bglobal\b")
_IMPORT = re.compile(r"\bimport\b")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: Blocks whose bodies may hold definitions that elision looks into.
_BLOCKS = (ast.If, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
#: Blocks whose bodies run at module level when they stand there.
_MODULE_BLOCKS = (*_BLOCKS, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)


class ElisionError(Exception):
    """The placeholders did not survive the transform (the caller parses the whole file)."""


@dataclass
class Reduced:
    """A module with some definitions replaced by placeholders."""

    data: bytes
    #: ``line_map[i]`` is the original line of reduced line ``i + 1``.
    line_map: list[int]
    #: Placeholder number -> the original bytes it stands for.
    pieces: list[bytes]

    def original_line(self, line: int) -> int:
        return self.line_map[line - 1] if 0 < line <= len(self.line_map) else line

    def reduced_line(self, original: int) -> int | None:
        """Where an original line that was kept (or begins a placeholder) is now."""
        inverse = self.__dict__.get("_inverse")
        if inverse is None:
            inverse = self.__dict__["_inverse"] = {o: r for r, o in enumerate(self.line_map, 1)}
        return inverse.get(original)

    def restore(self, new_data: bytes) -> bytes:
        """``new_data`` (the transformed reduced module) with every placeholder swapped back."""
        out: list[bytes] = []
        expected = 0
        for line in _BYTE_LINE.findall(new_data):
            match = _PLACEHOLDER.fullmatch(line)
            if match is None:
                out.append(line)
                continue
            if int(match.group(1)) != expected:
                raise ElisionError(f"placeholder {match.group(1)} out of order")
            out.append(self.pieces[expected])
            expected += 1
        if expected != len(self.pieces):
            raise ElisionError(f"{len(self.pieces) - expected} placeholder(s) lost")
        return b"".join(out)


def first_line(node: ast.stmt) -> int:
    """A statement's first line: its first decorator's, for a decorated definition."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def _block_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists directly inside ``node`` (bodies, else/finally, handlers, cases)."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
        yield part.body


def _module_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level (into if/try/with/for/while bodies), definitions excluded."""
    for node in body:
        if isinstance(node, _DEFINITIONS):
            continue
        yield node
        if isinstance(node, _MODULE_BLOCKS):
            for block in _block_bodies(node):
                yield from _module_level(block)


def _target_names(node: ast.expr | None) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _target_names(element)
    elif isinstance(node, ast.Starred):
        yield from _target_names(node.value)


def _header(node: ast.stmt) -> list[ast.AST]:
    """A statement's own parts: all of a simple statement, a block's header only."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target, node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return list(node.items)
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if hasattr(ast, "Match") and isinstance(node, ast.Match):
        return [node.subject]
    if isinstance(node, (ast.Try, *_BLOCKS)):
        return []
    return [node]


def _bound_names(node: ast.stmt) -> Iterator[str]:
    """Names a module-level simple statement (or the header of a block) binds."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _target_names(target)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        yield from _target_names(node.target)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            yield from _target_names(item.optional_vars)
    for sub in (s for part in _header(node) for s in ast.walk(part)):
        if isinstance(sub, ast.NamedExpr):  # `if (dev := "cuda"): ...`
            yield from _target_names(sub.target)


def _header_end(node: ast.stmt) -> int:
    """Last line of a statement's own text (a block's header, not its body)."""
    if isinstance(node, _MODULE_BLOCKS):
        body = getattr(node, "body", None)
        return max(node.lineno, body[0].lineno - 1) if body else node.lineno
    return node.end_lineno or node.lineno


def _imports_watched(node: ast.stmt) -> bool:
    """Whether a definition imports (or binds a name of) a watched package anywhere inside."""
    for sub in _all_imports(_block_bodies(node)):
        if isinstance(sub, ast.Import):
            for alias in sub.names:
                if {alias.name.split(".")[0], (alias.asname or "").split(".")[0]} & WATCHED_PACKAGES:
                    return True
        elif isinstance(sub, ast.ImportFrom):
            roots = {(sub.module or "").split(".")[0]} | {(a.asname or a.name) for a in sub.names}
            if roots & WATCHED_PACKAGES:
                return True
    return False


def _all_imports(blocks: Iterable[list[ast.stmt]]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``blocks``, at any depth (statement lists only: imports
    are statements)."""
    for block in blocks:
        for node in block:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            else:
                yield from _all_imports(_block_bodies(node))


def _import_bindings(imports: Iterable[ast.Import | ast.ImportFrom]) -> Iterator[tuple[str, str]]:
    """(local name, dotted name it is bound to) for each name the imports bind: ``import
    a.b`` binds ``a`` to ``a``; a relative import's dotted name keeps its leading dots."""
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    yield alias.asname, alias.name
                else:
                    root = alias.name.split(".")[0]
                    yield root, root
        else:
            base = "." * node.level + (f"{node.module}." if node.module else "")
            for alias in node.names:
                if alias.name != "*":
                    yield alias.asname or alias.name, base + alias.name


def _dotted(name: str) -> str:
    return r"\s*\.\s*".join(re.escape(part) for part in name.split(".")) + r"\b"


def spellings(names: Iterable[str], tree: ast.Module) -> set[str]:
    """Regexes for how ``names`` can be written in this file: in full, or through its imports."""
    names = set(names)
    out = {_dotted(name) for name in names}
    if names:
        for local, qualified in _import_bindings(_all_imports([tree.body])):
            for name in names:
                if name == qualified or name.startswith(qualified + "."):
                    out.add(_dotted(local + name[len(qualified):]))
                elif qualified.startswith(name + "."):  # `from torch.cuda.amp import autocast`
                    out.add(_dotted(local))
    return out


def _is_prose(value: str) -> bool:
    return any(c.isspace() for c in value.strip())


def _code_words(node: ast.stmt) -> str:
    """The identifiers and non-prose strings of a statement (of a block's header only),
    space-separated: no comments, no docstring-like prose."""
    parts: list[str] = []
    for sub in (s for root in _header(node) for s in ast.walk(root)):
        if isinstance(sub, ast.Name):
            parts.append(sub.id)
        elif isinstance(sub, ast.Attribute):
            parts.append(sub.attr)
        elif isinstance(sub, ast.keyword) and sub.arg:
            parts.append(sub.arg)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and not _is_prose(sub.value):
            parts.append(sub.value)
    return " ".join(parts)


class _Words:
    """One regex for the local triggers, the spellings of local names, and the names bound from them."""

    def __init__(self, triggers: Iterable[str | re.Pattern[str]], spelled: Iterable[str] = ()) -> None:
        self._parts = [t.pattern if isinstance(t, re.Pattern) else word_pattern(t) for t in triggers]
        self._spelled = sorted(spelled)
        self.names: set[str] = set()
        self._compile()

    def _compile(self) -> None:
        parts = self._parts + [re.escape(n) + r"\b" for n in sorted(self.names)]
        self.flow = re.compile(r"\b(?:" + "|".join(parts) + ")") if parts else None
        parts += self._spelled
        self.pattern = re.compile(r"\b(?:" + "|".join(parts) + ")") if parts else None

    def search(self, text: str) -> bool:
        return self.pattern is not None and self.pattern.search(text) is not None

    def flows_from(self, node: ast.stmt, text: str) -> bool:
        """Whether a module-level statement binds something worth following: its code,
        not its prose, contains a trigger or an already followed name."""
        if self.flow is None or self.flow.search(text) is None:
            return False
        return self.flow.search(_code_words(node)) is not None

    def add_names(self, names: Iterable[str]) -> bool:
        new = set(names) - self.names
        if new:
            self.names |= new
            self._compile()
        return bool(new)


def reduce(
    data: bytes, text: str, tree: ast.Module, triggers: Sequence[str | re.Pattern[str]], names: Sequence[str] = ()
) -> Reduced | None:
    """``data`` with the definitions that cannot matter replaced; None when nothing can go."""
    if b"__npu_migrate_elided_" in data:  # our own marker in the source: never guess
        return None
    text_lines = _TEXT_LINE.findall(text)
    words = _Words(triggers, spellings(names, tree))

    def lines(first: int, last: int) -> str:
        return "".join(text_lines[first - 1 : last])

    # Module-level imports that bind a name of their own (`import a.b as c`, `from a import b`);
    # a plain `import a.b` is always spelled in full where it is used.
    module_imports = (n for n in _module_level(tree.body) if isinstance(n, (ast.Import, ast.ImportFrom)))
    words.add_names(local for local, full in _import_bindings(module_imports) if full != local and words.search(full))
    binders = [(n, bound) for n in _module_level(tree.body) if (bound := list(_bound_names(n)))]
    changed = True
    while changed:  # DEV = "cuda"; DEVICE = DEV; ... until no new name
        changed = words.add_names(
            name
            for node, bound in binders
            if words.flows_from(node, lines(node.lineno, _header_end(node)))
            for name in bound
        )

    elided: list[tuple[int, int]] = []
    called_with_triggers = _called_with_triggers(tree, words)

    def needed(node: ast.stmt, segment: str) -> bool:
        if words.search(segment) or _ALWAYS_KEEP.search(segment):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in called_with_triggers:
            return True  # `f("cuda")`: the analysis follows the value into f's parameters
        return bool(_IMPORT.search(segment)) and _imports_watched(node)

    def visit(body: Sequence[ast.stmt], in_class: bool) -> None:
        for node in body:
            if isinstance(node, _DEFINITIONS):
                first, last = first_line(node), node.end_lineno or node.lineno
                if not needed(node, lines(first, last)):
                    elided.append((first, last))
                elif isinstance(node, ast.ClassDef) and not in_class:
                    visit(node.body, True)
            elif not in_class and isinstance(node, _BLOCKS):
                for block in _block_bodies(node):
                    visit(block, False)

    visit(tree.body, False)
    if not elided:
        return None
    return _replace(data, sorted(elided))


#: a name that holds a device or a device switch (``use_cuda``, ``gpu_ok``, ``cuda_device``)
_DEVICE_NAME = re.compile(r"cuda|gpu", re.IGNORECASE)


def _called_with_triggers(tree: ast.Module, words: _Words) -> set[str]:
    """Names of functions called anywhere in the file with an argument that holds a
    trigger (``_test_model_1device("cuda")``, ``init_cam(model, use_cuda)``): the
    reaches-torch analysis reads those
    functions' parameters to decide what the argument is."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and any(
                (isinstance(a, ast.Constant) and isinstance(a.value, str) and words.search(a.value))
                or (isinstance(a, ast.Name) and _DEVICE_NAME.search(a.id))  # `init_cam(model, use_cuda)`
                for arg in [*node.args, *(k.value for k in node.keywords)] for a in ast.walk(arg)):
            names.add(node.func.id)
    return names


def _replace(data: bytes, elided: list[tuple[int, int]]) -> Reduced:
    byte_lines = _BYTE_LINE.findall(data)
    out: list[bytes] = []
    line_map: list[int] = []
    pieces: list[bytes] = []
    line = 1
    for first, last in elided:
        out.extend(byte_lines[line - 1 : first - 1])
        line_map.extend(range(line, first))
        segment = byte_lines[first - 1 : last]
        ending = segment[-1][len(segment[-1].rstrip(b"\r\n")) :]
        indent = _INDENT.match(segment[0]).group()
        out.append(b"%spass  # __npu_migrate_elided_%d__%s" % (indent, len(pieces), ending))
        line_map.append(first)
        pieces.append(b"".join(segment))
        line = last + 1
    out.extend(byte_lines[line - 1 :])
    line_map.extend(range(line, len(byte_lines) + 1))
    return Reduced(b"".join(out), line_map, pieces)
