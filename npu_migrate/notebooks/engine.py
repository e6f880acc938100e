"""Migrates one notebook: read and validate (nbformat), join the Python code
cells into one module (``cells.py``), run the Python engine on it, cut it back
into cells, hand ``!`` lines and ``%%bash`` cells to the shell front end (when
installed), run the notebook rules on IPython lines, then write the changed
cells' ``source`` values back in place (``layout.py``).

Fixes and findings are located in their cell: ``line``/``col`` are within the
cell, and the cell's number (1-based: the first cell of the notebook is cell 1)
is the ``cell`` of the Fix/Finding. Bad input (not JSON, not a valid notebook, a syntax
error in a cell) is one line naming the file and the cell.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from npu_migrate.notebooks import cells as joiner
from npu_migrate.notebooks import layout
from npu_migrate.notebooks.lines import CellLine, NotebookFile, located
from npu_migrate.notebooks.magics import SHELL_CELL_MAGICS, cell_magic, specials
from npu_migrate.pipeline import filetypes, limits
from npu_migrate.pipeline.edits import TextEdit, apply
from npu_migrate.pipeline.model import FileResult, Finding
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings

if TYPE_CHECKING:
    from npu_migrate.pipeline.model import FileResult as Result

_SYNTAX = re.compile(r"^.*?:(\d+):(\d+): (.*)$")
#: Python rules that do not run on notebooks: the runtime shim (NPU701) is for
#: training jobs, not for an interactive kernel (its watchdog and distributed
#: setup would start in the middle of a notebook, after its last import).
NOT_IN_NOTEBOOKS = ("NPU701",)


def migrate(path: str, data: bytes, settings: Settings) -> Result:
    """Never raises for bad input."""
    import nbformat

    result = FileResult(path=path)
    limits.check(data, "notebook")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    try:
        notebook = nbformat.reads(data.decode("utf-8"), as_version=nbformat.NO_CONVERT)
        _validate(notebook)
    except UnicodeDecodeError:
        result.error = f"{path}:1: not UTF-8 text"
        return result
    except Exception as exc:  # noqa: BLE001 - nbformat raises JSON, schema and its own errors
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result.error = f"{path}:1: not a valid notebook: {message}"
        return result
    if notebook.nbformat < 4:
        result.error = f"{path}:1: nbformat {notebook.nbformat} notebooks are not supported (save it as nbformat 4)"
        return result
    language = (notebook.metadata.get("kernelspec", {}).get("language")
                or notebook.metadata.get("language_info", {}).get("name") or "python")
    if language.lower() != "python":
        return result
    code = {i: cell.source for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"}
    new = dict(code)
    if not _python(path, code, new, result, settings):
        return result
    nb_file = NotebookFile()
    _ipython_lines(path, code, new, nb_file, result, settings)
    result.fixes = sorted(set(result.fixes) | set(nb_file.fixes))
    result.findings = sorted(set(result.findings) | set(nb_file.findings))
    runtime = colab_gpu_runtime(notebook.metadata)
    if runtime is not None and result.fixes:
        first = result.fixes[0]
        note = Finding(first.line, first.col, COLAB_RULE,
                       f"this notebook is set up for Colab's GPU runtime ({runtime}), where torch_npu is not: "
                       "its code is left unchanged",
                       "to run it on an Ascend notebook (a ModelArts notebook), remove that runtime setting from its "
                       "metadata and run npu-migrate again", first.end_line, first.end_col, first.cell)
        result.fixes, result.findings = [], sorted(set(result.findings) | {note})
        return result
    changed = {i: text for i, text in new.items() if text != code[i]}
    if changed:
        if len(data) > limits.MAX_BYTES["json"]:
            # the cells' positions are read with the JSON reader, whose tree costs about 17
            # times the file (48 MB of printed lines: 0.8 GB): past its bound, one line that
            # says what to do instead of its bare "larger than 32 MB" after all this work
            return FileResult(path=path, error=(
                f"{path}:1: {len(data) / (1 << 20):.1f} MB notebook with {len(changed)} cell(s) to migrate; "
                f"npu-migrate writes cells back only into notebooks of up to {limits.MAX_BYTES['json'] >> 20} MB "
                "(outputs are most of it: clear them, e.g. `jupyter nbconvert --clear-output --inplace`, "
                "and run again); skipped"))
        positions = layout.sources(data)
        ensure_ascii = layout.ascii_style(data)  # once: it reads the whole file
        edits = [TextEdit(positions[i].start, positions[i].end,
                          layout.render(data, positions[i], code[i], text, ensure_ascii), "", "")
                 for i, text in changed.items() if i in positions]
        result.new_source, _ = apply(data, edits)
    return result


#: the rule of the note for a Colab GPU notebook: CUDA's code left as CUDA's
COLAB_RULE = "NPU011"


def colab_gpu_runtime(metadata) -> str | None:
    """What says a notebook was written for Colab's NVIDIA runtime (``"accelerator":
    "GPU"``, ``colab.gpuType``: Janus's ``Janus_colab_demo.ipynb``, held-out round 16), or
    None. Its ``.cuda()`` calls serve that runtime, where ``.npu()`` fails: the tool cannot
    tell whether it will ever run on Ascend, so it leaves it and says so."""
    colab = metadata.get("colab") if isinstance(metadata.get("colab"), dict) else {}
    gpu = colab.get("gpuType") or metadata.get("gpuClass")
    if isinstance(gpu, str) and gpu:
        return f"Colab gpuType {gpu}"
    if str(metadata.get("accelerator", "")).upper() == "GPU" and "colab" in metadata:
        return "Colab accelerator GPU"
    return None


#: Keys a notebook may lack and still be read as Jupyter reads it: the engine never
#: looks at them, and its edits touch only ``source`` strings in place.
_OPTIONAL_KEYS = frozenset({"execution_count", "outputs", "id", "attachments"})


def _validate(notebook) -> None:
    """nbformat's schema check, except that a cell without ``execution_count``,
    ``outputs`` or ``id`` is accepted: Jupyter and ``nbformat.read``
    open such notebooks (Colab and hand-edited ones often lack them, ai-toolkit's
    SliderTraining.ipynb among them), and nothing npu-migrate reads or writes needs
    them. Any other schema error is still bad input."""
    from nbformat.validator import iter_validate

    for error in iter_validate(notebook):
        absent = ({key for key in error.validator_value if key not in error.instance}
                  if error.validator == "required" else set())
        in_a_cell = len(error.absolute_path) == 2 and error.absolute_path[0] == "cells"
        if not (absent and absent <= _OPTIONAL_KEYS and in_a_cell):
            raise error


def _python(path: str, code: dict[int, str], new: dict[int, str], result: FileResult, settings: Settings) -> bool:
    """Migrate the Python cells as one module; False (and ``result.error``) on a syntax error."""
    from npu_migrate.python.engine import migrate_source

    joined = joiner.join(code)
    if not joined.starts:
        return True
    selection = dataclasses.replace(settings.selection, ignore=settings.selection.ignore + NOT_IN_NOTEBOOKS)
    migrated = migrate_source(path, joined.source.encode(), dataclasses.replace(settings, selection=selection))
    if migrated.error is not None:
        match = _SYNTAX.match(migrated.error)
        where = joined.locate(int(match.group(1))) if match else None
        if where is not None:
            result.error = f"{path}: cell {where[0] + 1}, line {where[1]}:{match.group(2)}: {match.group(3)}"
        else:
            result.error = f"{path}:1: {migrated.error.split(': ', 1)[-1]}"
        return False
    for items, target in ((migrated.fixes, result.fixes), (migrated.findings, result.findings)):
        for item in items:
            where = joined.locate(item.line)
            if where is not None:
                target.append(located(item, where[0], where[1]))
    if migrated.new_source is not None:
        new.update(joiner.split(joined, migrated.new_source.decode("utf-8"), code))
    return True


def _ipython_lines(path: str, code: dict[int, str], new: dict[int, str], nb_file: NotebookFile,
                   result: FileResult, settings: Settings) -> None:
    """Shell escapes and ``%%bash`` cells through the shell front end; every IPython line
    through the notebook rules."""
    rules = [cls(nb_file) for rid, cls in rules_for("notebook").items() if settings.selection.active(rid, path)]
    shell = filetypes.named("shell")
    for index in code:
        lines = new[index].splitlines(keepends=True)
        magic = cell_magic(lines)
        if magic is not None and magic in SHELL_CELL_MAGICS and shell is not None:
            body = "".join(lines[1:])
            migrated = _shell(shell, path, body, index, 1, result, settings)
            if migrated is not None:
                new[index] = lines[0] + migrated
            continue
        if magic is not None:
            continue
        for special in specials(lines):
            text = special.text.rstrip("\r\n")
            line = CellLine(index, special.first + 1, text)
            for rule in rules:
                rule.visit_line(line)
            stripped = text.lstrip()
            if shell is not None and stripped.startswith("!") and (index, line.line) not in nb_file.lines:
                offset = len(text) - len(stripped) + (2 if stripped.startswith("!!") else 1)
                command, held = hold_expressions(text[offset:])
                migrated = _shell(shell, path, command, index, special.first, result, settings, offset, held)
                if migrated is not None:
                    _replace_lines(nb_file, index, special, text[:offset] + restore_expressions(migrated, held))
        for number, old in enumerate(lines, start=1):  # this cell's lines, not every replaced line of the notebook
            replaced = nb_file.lines.get((index, number))
            if replaced is not None:
                # (None: a continuation line whose text moved into the line before it)
                lines[number - 1] = "" if replaced[0] is None else replaced[0] + old[len(old.rstrip("\r\n")):]
        new[index] = "".join(lines)


def _replace_lines(nb_file: NotebookFile, cell: int, special, text: str) -> None:
    """Put the migrated ``text`` of a shell escape in place of the cell lines it spans: a
    command continued with ``\\`` over several lines keeps one line per line (each keeps
    its own line end); were the count to change, the first line takes it all and the
    others are dropped. (Only the first line was replaced once, so the continuation
    lines followed the migrated command a second time: MedicalGPT's PPO cell, held-out
    round 21.)"""
    count = special.last - special.first + 1
    pieces = [piece.rstrip("\r\n") for piece in text.splitlines(keepends=True)] or [""]
    if len(pieces) == count:
        for offset, piece in enumerate(pieces):
            nb_file.lines[(cell, special.first + 1 + offset)] = (piece, "", "")
        return
    last_end = text[len(text.rstrip("\r\n")):]
    nb_file.lines[(cell, special.first + 1)] = (text[: len(text) - len(last_end)] if last_end else text, "", "")
    for offset in range(1, count):
        nb_file.lines[(cell, special.first + 1 + offset)] = (None, "", "")


#: IPython expands ``{expression}`` in a ``!`` line before the shell sees it
#: (``!{sys.executable} -m pip install x``); the shell parser gets a plain word.
_EXPRESSION = re.compile(r"\{[^{}\s][^{}]*\}")


def hold_expressions(command: str) -> tuple[str, list[tuple[int, str, str]]]:
    """``command`` with each ``{expression}`` replaced by a unique word, and
    ``(offset, word, expression)`` of each, for :func:`restore_expressions`."""
    held: list[tuple[int, str, str]] = []
    parts = []
    cursor = 0
    for number, match in enumerate(_EXPRESSION.finditer(command)):
        word = f"NPUMIGRATEEXPR{number}"
        parts += [command[cursor : match.start()], word]
        held.append((match.start() + sum(len(w) - len(e) for _, w, e in held), word, match.group()))
        cursor = match.end()
    return "".join(parts) + command[cursor:], held


def restore_expressions(command: str, held: list[tuple[int, str, str]]) -> str:
    for _, word, expression in held:
        command = command.replace(word, expression, 1)
    return command


def _original_column(col: int, held: list[tuple[int, str, str]]) -> int:
    """A column of the command with held expressions -> the same place in the line as written."""
    return col - sum(len(word) - len(expression) for at, word, expression in held if at < col)


def _shell(shell, path: str, text: str, cell: int, first: int, result: FileResult, settings: Settings,
           column: int = 0, held: list[tuple[int, str, str]] = ()) -> str | None:
    """Migrate shell code of a cell with the shell front end; returns its new text."""
    migrated = shell.migrate()(path, text.encode(), settings)
    if migrated.error is not None:
        return None
    for items, target in ((migrated.fixes, result.fixes), (migrated.findings, result.findings)):
        for item in items:
            shift = column if item.line == 1 else 0
            col = _original_column(item.col, held) if item.line == 1 else item.col
            end_col = item.end_col
            if end_col is not None and item.end_line == 1:
                end_col = _original_column(end_col, held) + shift
            moved = dataclasses.replace(item, col=col + shift, end_col=end_col)
            target.append(located(moved, cell, first + item.line))
    return migrated.new_source.decode("utf-8") if migrated.new_source is not None else None
