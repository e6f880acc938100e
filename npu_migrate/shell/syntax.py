"""Reading a bash tree the way the rules need it.

* :class:`Arg`: one shell word as its pieces (literal bytes with their offsets,
  and expansions, which are opaque), so a rule can match ``--device=cuda:$RANK``
  and rewrite exactly the four bytes ``cuda`` whatever quoting surrounds them.
* :func:`command_args`: the words of a command; :func:`launch_args`: the words
  after the program that launches Python training (``python``, ``torchrun``,
  ``deepspeed``, ``accelerate launch``...), also behind wrappers such as
  ``srun`` or ``nohup``, after the ``--`` of ``ray job submit``, and ``uv run -m``; :func:`option_values`: ``--name value`` and
  ``--name=value`` pairs among them.
* :func:`string_args`: the words of an option string kept in a variable
  (``ARGS="--backend nccl --lr 1"``).
* :func:`statement_start`: where ``--annotate`` can put a comment line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

#: Nodes whose text is a literal (the quotes of strings are dropped).
_LITERAL = {"word", "number", "string_content", "raw_string", "heredoc_content", "extglob_pattern"}
#: Node types that hold statements.
CONTAINERS = {"program", "do_group", "compound_statement", "if_statement", "elif_clause", "else_clause",
              "case_item", "subshell", "while_statement", "for_statement", "c_style_for_statement"}
#: Programs that start Python training.
LAUNCHERS = {"python", "torchrun", "torch_npu_run", "deepspeed", "accelerate"}
#: Programs that run another command given as their arguments.
WRAPPERS = {"srun", "mpirun", "mpiexec", "nohup", "exec", "time", "env", "numactl", "taskset", "timeout",
            "stdbuf", "nice", "ionice", "sudo", "singularity", "apptainer", "docker", "podman", "xargs",
            "horovodrun", "jsrun", "aprun", "command", "builtin", "eval", "uv", "poetry", "conda", "pixi"}
_VERSION = re.compile(r"[\d.]+$")


@dataclass(frozen=True)
class Piece:
    text: bytes
    start: int | None  # byte offset of a literal piece; None for an expansion


@dataclass(frozen=True)
class Arg:
    """One shell word (or one word of an option string) as literal and opaque pieces."""

    pieces: tuple[Piece, ...]
    node: Node

    @property
    def text(self) -> str:
        """The word with expansions as written (``cuda:$RANK``)."""
        return b"".join(p.text for p in self.pieces).decode("utf-8", "replace")

    @property
    def static(self) -> bool:
        return all(p.start is not None for p in self.pieces)

    def span(self, begin: int, end: int) -> tuple[int, int] | None:
        """File offsets of ``text[begin:end]`` when it lies inside one literal piece."""
        flat = 0
        for piece in self.pieces:
            size = len(piece.text)
            if piece.start is not None and flat <= begin and end <= flat + size:
                return piece.start + begin - flat, piece.start + end - flat
            flat += size
        return None

    def after(self, begin: int) -> Arg:
        """The part of the word from ``text[begin:]`` on (``--device=cuda`` -> ``cuda``)."""
        pieces, flat = [], 0
        for piece in self.pieces:
            size = len(piece.text)
            if flat + size > begin:
                cut = max(0, begin - flat)
                if piece.start is None:
                    pieces.append(piece if cut == 0 else Piece(piece.text[cut:], None))
                else:
                    pieces.append(Piece(piece.text[cut:], piece.start + cut))
            flat += size
        return Arg(tuple(pieces), self.node)


def pieces(node: Node) -> list[Piece]:
    if node.type in ("string", "concatenation", "translated_string"):
        out: list[Piece] = []
        for child in node.children:
            if child.type == '"':
                continue
            out.extend(pieces(child))
        return out
    if node.type == "raw_string":
        return [Piece(node.text[1:-1], node.start_byte + 1)]
    if node.type in _LITERAL:
        return [Piece(node.text, node.start_byte)]
    return [Piece(node.text, None)]


def arg(node: Node) -> Arg:
    return Arg(tuple(pieces(node)), node)


def command_args(command: Node) -> list[Arg]:
    """The program and its arguments (not the ``VAR=x`` prefixes or redirections)."""
    out = []
    for index, child in enumerate(command.children):
        if child.type == "command_name":
            out.append(arg(child.children[0]) if child.children else arg(child))
        elif command.field_name_for_child(index) == "argument":
            out.append(arg(child))
    return out


def program(word: Arg) -> str:
    """``python`` for ``/usr/bin/python3.10``, ``PYTHON`` for ``$PYTHON_BIN``."""
    text = word.text
    if text.startswith("$"):
        name = text.strip("${}\"'")
        return "python" if "PYTHON" in name.upper() else name
    return _VERSION.sub("", os.path.basename(text.strip("\"'")))


def launch_args(command: Node) -> tuple[str, list[Arg]] | None:
    """The launcher (``python``, ``torchrun``, ...) of a command line and the words after
    it, looking through wrappers (``srun -N 2 python train.py``) and Ray's job
    submission (``ray job submit --address=... -- python train.py``); None if the
    command does not start Python training."""
    return _launch(command_args(command))


def _launch(words: list[Arg]) -> tuple[str, list[Arg]] | None:
    if not words:
        return None
    first = program(words[0])
    if first == "ray":
        entrypoint = ray_job_entrypoint(words)
        return _launch(entrypoint) if entrypoint else None
    if first == "uv" and len(words) > 2 and words[1].text == "run":
        return _uv_run(words)
    if first == "coverage" and len(words) > 2 and words[1].text == "run":
        return _coverage_run(words)
    if first in LAUNCHERS:
        index = 0
    elif first in WRAPPERS:
        index = next((i for i, w in enumerate(words[1:], 1) if program(w) in LAUNCHERS), None)
        if index is None:
            return None
    else:
        return None
    name = program(words[index])
    rest = words[index + 1 :]
    if name == "accelerate":
        if not rest or rest[0].text != "launch":
            return None
        rest = rest[1:]
    return name, rest


#: ``uv run`` options that take the next word as their value (``uv run --help`` of uv 0.13.8)
_UV_VALUE_OPTIONS = {
    "--extra", "--no-extra", "--group", "--no-group", "--only-group", "--no-editable-package", "--env-file", "-w",
    "--with", "--with-editable", "--with-requirements", "--package", "--python-platform", "--index",
    "--default-index", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--index-strategy",
    "--keyring-provider", "-P", "--upgrade-package", "--upgrade-group", "--resolution", "--prerelease",
    "--prerelease-package", "--fork-strategy", "--exclude-newer", "--exclude-newer-package", "--no-sources-package",
    "--reinstall-package", "--link-mode", "-C", "--config-setting", "--config-settings-package",
    "--no-build-isolation-package", "--no-build-package", "--no-binary-package", "--cache-dir", "--refresh-package",
    "-p", "--python", "--color", "--allow-insecure-host", "--directory", "--project", "--config-file",
}


def _uv_run(words: list[Arg]) -> tuple[str, list[Arg]] | None:
    """``uv run [options] -m module ...`` and ``uv run [options] script.py ...`` run Python
    (SkyRL's launchers: ``uv run --isolated --extra fsdp -m skyrl.train.entrypoints.main_base
    ...``); ``uv run [options] python|torchrun ...`` is read as that launcher. The
    launcher's words start at ``-m`` or the script, as after ``python``."""
    return _runner(words, _UV_VALUE_OPTIONS, launchers=True)


#: ``coverage run`` options that take the next word as their value (coverage.py's
#: ``coverage/cmdline.py``, ``Opts``: concurrency, context, data-file, debug, include, omit,
#: rcfile, save-signal, source; the others are flags)
_COVERAGE_VALUE_OPTIONS = {"--concurrency", "--context", "--data-file", "--debug", "--include", "--omit",
                           "--rcfile", "--save-signal", "--source"}


def _coverage_run(words: list[Arg]) -> tuple[str, list[Arg]] | None:
    """``coverage run [options] -m module ...`` and ``coverage run [options] script.py ...``
    run Python as ``python`` would (coverage.py's docs: "Your program runs just as if it had
    been invoked with the Python command line"), so ``coverage run -m torch.distributed.run
    ...`` is a torchrun launch (NeMo-RL's ``uv run coverage run ... run_grpo.py``). The
    launcher's words start at ``-m`` or the script, as after ``python``."""
    return _runner(words, _COVERAGE_VALUE_OPTIONS)


def _runner(words: list[Arg], value_options: set[str], *, launchers: bool = False) -> tuple[str, list[Arg]] | None:
    """The Python launch behind a two-word runner (``uv run``, ``coverage run``): its
    options skipped (``value_options`` take the next word), then ``-m module`` or a
    ``script.py`` read as after ``python``, or, where ``launchers``, a launcher it runs."""
    index = 2
    while index < len(words):
        text = words[index].text
        if text in ("-m", "--module"):
            return "python", words[index:]
        if text.startswith("-"):
            index += 2 if text in value_options else 1
            continue
        if launchers and (program(words[index]) in LAUNCHERS or program(words[index]) == "coverage"):
            return _launch(words[index:])
        return ("python", words[index:]) if text.endswith(".py") else None
    return None


def ray_job_entrypoint(words: list[Arg]) -> list[Arg] | None:
    """The entrypoint of ``ray job submit [options] -- CMD ...``: the words after the
    ``--`` (``ray/dashboard/modules/job/cli.py``: ``entrypoint`` is every argument after
    the options, and its docs write the ``--``). None for other commands, and for a
    submission without ``--`` (there the entrypoint's own options would be Ray's)."""
    if len(words) < 5 or program(words[0]) != "ray" or [w.text for w in words[1:3]] != ["job", "submit"]:
        return None
    index = next((i for i, w in enumerate(words[3:], 3) if w.text == "--"), None)
    return words[index + 1 :] if index is not None and index + 1 < len(words) else None


def option_values(words: list[Arg]) -> Iterator[tuple[str, Arg]]:
    """``(name, value)`` for ``--name value``, ``--name=value`` and ``key=value``
    (Hydra-style overrides), and ``(KEY, value)`` for yacs pairs (``MODEL.DEVICE cuda``)."""
    for index, word in enumerate(words):
        text = word.text
        if text.startswith("-"):
            if "=" in text:
                name, _, _ = text.partition("=")
                yield name, word.after(len(name) + 1)
            elif index + 1 < len(words) and not words[index + 1].text.startswith("-"):
                yield text, words[index + 1]
        elif "=" in text and not text.startswith(("$", "=")):
            name, _, _ = text.partition("=")
            yield name, word.after(len(name) + 1)
        elif re.fullmatch(r"[A-Z][A-Z0-9_]*(?:\.[A-Z][A-Z0-9_]*)+", text) and index + 1 < len(words):
            yield text, words[index + 1]


def string_args(node: Node) -> list[Arg]:
    """The whitespace-separated words of a string (an option string kept in a
    variable); a ``\\`` before a line break is dropped as the shell does."""
    words: list[Arg] = []
    current: list[Piece] = []

    def flush() -> None:
        if current:
            words.append(Arg(tuple(current), node))
            current.clear()

    for piece in pieces(node):
        if piece.start is None:
            current.append(piece)
            continue
        for match in re.finditer(rb"[^\s\\]+|\\\r?\n|\\.?|\s+", piece.text):
            chunk = match.group()
            if chunk[:1].isspace() or chunk.startswith((b"\\\n", b"\\\r")):
                flush()
            else:
                current.append(Piece(chunk, piece.start + match.start()))
        # pieces of one word written next to each other stay one word
    flush()
    return words


def static_value(node: Node) -> str | None:
    """The value of a word or quoted string without expansions, else None."""
    word = arg(node)
    return word.text if word.static else None


def top_statement(node: Node) -> Node:
    """The child of the program that holds ``node``."""
    while node.parent is not None and node.parent.type != "program":
        node = node.parent
    return node


def statement_start(node: Node, data: bytes) -> int:
    """Where a comment line may go above the statement that holds ``node``: the
    innermost statement whose line is not the continuation of another line, nor
    inside a string or heredoc; at worst the top-level statement's start."""
    candidate = node
    while candidate.parent is not None:
        if candidate.parent.type in CONTAINERS and candidate.type not in ("comment",):
            start = data.rfind(b"\n", 0, candidate.start_byte) + 1
            if _safe_line_start(candidate, data, start):
                return start
        candidate = candidate.parent
    # the top-level statement's first line that does not continue another one
    start = data.rfind(b"\n", 0, top_statement(node).start_byte) + 1
    while start > 0 and data[: start - 1].rstrip(b"\r").endswith(b"\\"):
        start = data.rfind(b"\n", 0, start - 1) + 1
    return start


def _safe_line_start(statement: Node, data: bytes, start: int) -> bool:
    if start == 0:
        return True
    previous = data[: start - 1].rstrip(b"\r")
    if previous.endswith(b"\\"):
        return False
    root = statement
    while root.parent is not None:
        root = root.parent
    inner = root.descendant_for_byte_range(start - 1, start)
    while inner is not None:
        if inner.type in ("string", "raw_string", "heredoc_body", "heredoc_redirect", "ansi_c_string"):
            return False
        inner = inner.parent
    return True


_SHELLS = {"bash", "sh", "dash"}
_DASH_C = re.compile(r"-[a-zA-Z]*c[a-zA-Z]*")


class EmbeddedScripts:
    """Collects strings that hold shell code run by the script: ``eval "..."``,
    ``bash -c '...'`` (also behind wrappers: ``srun bash -c ...``), and string
    variables that are ``eval``-ed or run as a command (``run_cmd="python ..."``,
    then ``eval $run_cmd``). The engine parses their contents as shell too."""

    def __init__(self) -> None:
        self.strings: list[Node] = []
        self.assigned: dict[str, list[Node]] = {}
        self.run_vars: set[str] = set()
        #: bodies of heredocs that hold a shell script, and whether their bytes are the
        #: script's (a quoted delimiter, or nothing the shell expands while writing it)
        self.heredocs: list[tuple[Node, bool]] = []

    def visit_heredoc_redirect(self, node: Node) -> None:
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        statement = node.parent
        if body is None or start is None or statement is None or statement.type != "redirected_statement":
            return
        command = statement.child_by_field_name("body")
        if command is None or command.type != "command":
            return
        if not _holds_script(command, [*node.children, *statement.children], body.text):
            return
        quoted = start.text[:1] in (b"'", b'"', b"\\")
        self.heredocs.append((body, quoted or not any(c in body.text for c in b"$`\\")))

    def visit_variable_assignment(self, node: Node) -> None:
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        if name is not None and value is not None and _quoted(value):
            self.assigned.setdefault(name.text.decode("utf-8", "replace"), []).append(value)

    def visit_command(self, node: Node) -> None:
        words = command_args(node)
        if not words:
            return
        if words[0].node.type in ("simple_expansion", "expansion"):
            self._take(words[0].node)  # $run_cmd as the command
        if program(words[0]) == "eval":
            for word in words[1:]:
                self._take(word.node)
            return
        for index, word in enumerate(words[:-2]):
            if program(word) in _SHELLS and _DASH_C.fullmatch(words[index + 1].text):
                self._take(words[index + 2].node)
                return

    def _take(self, node: Node) -> None:
        if _quoted(node):
            self.strings.append(node)
            return
        if node.type in ("simple_expansion", "expansion"):
            name = _expansion_name(node)
            if name is not None:
                self.run_vars.add(name)

    def scripts(self) -> list[Node]:
        found = list(self.strings)
        for name in sorted(self.run_vars):
            found.extend(self.assigned.get(name, ()))
        return sorted(set(found), key=lambda n: n.start_byte)


#: programs that run the heredoc fed to them as a shell script
_SCRIPT_READERS = {"bash", "sh", "dash", "zsh", "sbatch"}
#: file names a heredoc writes a shell script to
_SCRIPT_FILE = re.compile(r"[\w.${}/-]*\.(?:sh|bash|slurm|sbatch)[\"']?")


def _holds_script(command: Node, redirects: list[Node], body: bytes) -> bool:
    """The heredoc fed to ``command`` is a shell script: run by a shell or sbatch
    (``bash <<EOF``, ``sbatch <<EOF``), or written by ``cat``/``tee`` to a ``*.sh``
    file (``cat <<EOF > job.sh``, ``tee run.sh <<'EOF'``) or starting with a
    shell's ``#!`` line."""
    words = command_args(command)
    if not words:
        return False
    name = program(words[0])
    if name in _SCRIPT_READERS and len(words) == 1:
        return True
    if name not in ("cat", "tee"):
        return False
    first = body.lstrip().split(b"\n", 1)[0]
    if first.startswith(b"#!") and re.search(rb"\b(?:ba|da|z)?sh\b", first):
        return True
    targets = [w.text for w in words[1:]] if name == "tee" else []
    for redirect in redirects:
        if redirect.type == "file_redirect":
            destination = redirect.child_by_field_name("destination")
            if destination is not None:
                targets.append(destination.text.decode("utf-8", "replace"))
    return any(_SCRIPT_FILE.fullmatch(t.strip("\"'")) for t in targets)


def _quoted(node: Node) -> bool:
    """A string, or quoted strings and words side by side that open and close with the
    same quote (``"--lr_schedule "LE" --lr 1"``: the shell code is what lies between)."""
    if node.type in ("string", "raw_string"):
        return True
    if node.type == "concatenation" and node.child_count >= 2:
        first, last = node.children[0], node.children[-1]
        return first.type == last.type and first.type in ("string", "raw_string")
    return False


def _expansion_name(node: Node) -> str | None:
    children = node.named_children
    if len(children) == 1 and children[0].type == "variable_name":
        return children[0].text.decode("utf-8", "replace")
    return None


def content_range(string: Node) -> tuple[int, int]:
    """The bytes between a string's quotes."""
    return string.start_byte + 1, string.end_byte - 1
