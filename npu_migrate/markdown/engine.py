"""Markdown files: the shell commands in fenced code blocks (```bash, ```sh,
```shell, ```console..., and untagged fences whose every line is a command), run
through the shell rules and **reported**, never rewritten.

READMEs carry the commands users copy (stanford_alpaca's and FastChat's
``torchrun ... --tf32 True``, HF examples' ``--optim adamw_bnb_8bit``). A
README is prose that people read and edit, not a program the tool can prove
it keeps working: a rewritten command may be quoted in the text around it,
repeated in another language's README, or be a CUDA-vs-NPU comparison the
author wants to keep. So every fix the shell rules would make in a script
becomes a finding here, with its ``file:line`` in the Markdown file, and the
file is never written (``--write`` and ``--check`` leave it alone; findings
never fail ``--check``, ``--fail-on-findings`` decides). Blocks are found with
markdown-it-py's CommonMark parser (fences in lists and block quotes included;
indented code blocks are not commands and are skipped). In ``console`` /
``shell-session`` blocks only the ``$ `` prompt lines are commands; output
lines are blanked (and prompts turned into blanks) so lines and columns
still match. Placeholders such as ``<your_random_port>`` (stanford_alpaca's
README), which bash would parse as redirections, are blanked to underscores of
the same length first.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from npu_migrate.pipeline.model import FileResult, Finding
from npu_migrate.pipeline.settings import Settings
from npu_migrate.shell.engine import migrate as migrate_shell

#: Fence languages whose blocks are shell commands.
SHELL_FENCES = frozenset({"bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession"})
#: Of those, the ones that mix ``$ `` prompt lines with output.
SESSION_FENCES = frozenset({"console", "shell-session", "shellsession"})

#: README placeholders (``--master_port=<your_random_port>``), which bash would read as
#: redirections: blanked to ``_`` of the same length before the block is parsed.
PLACEHOLDER = re.compile(r"<[A-Za-z_][\w./ -]*>")

NOTE = "a command in a Markdown code block: reported, the file is left as is"

#: A line that may open a shell fence (after any list markers and block-quote marks):
#: a file without one has no block to report and is never parsed.
SHELL_FENCE_OPENER = re.compile(
    r"^[ \t>*+\-\d.)]*(?:`{3,}|~{3,})[ \t]*(?:" + "|".join(sorted(SHELL_FENCES, key=len, reverse=True)) + r")\b",
    re.IGNORECASE | re.MULTILINE)
#: The most lines / characters of a Markdown file with a shell fence that is parsed
#: (markdown-it-py's block parser costs up to ~0.2 ms a line on hostile shapes, so
#: 20,000 lines stay within about 5 s); past them the file is skipped (one line, as
#: every front end's limit: npu_migrate/pipeline/limits.py).
MAX_LINES = 20_000
MAX_CHARS = 4 << 20


#: the first word of a command line in a fence that names no language (LLaVA's README:
#: ```` ``` ```` then ``pip install flash-attn --no-build-isolation``)
_COMMAND = re.compile(
    r"(?:pip3?|python3?|conda|mamba|uv|torchrun|deepspeed|accelerate|bash|sh|export|cd|git|apt(?:-get)?|"
    r"sudo|docker|srun|sbatch|huggingface-cli|wget|curl|[A-Z_][A-Z0-9_]*=\S*)(?:\s|$)")
#: an untagged fence opener whose first line is a command (the cheap test before parsing)
_UNTAGGED_COMMAND_FENCE = re.compile(r"^[ \t>*+\-\d.)]*(?:`{3,}|~{3,})[ \t]*\r?\n[ \t>]*" + _COMMAND.pattern,
                                     re.MULTILINE)


def _parser() -> MarkdownIt:
    """CommonMark's block structure only. Inline parsing (emphasis, links, brackets) and
    link reference definitions are switched off: fences are found without them, and
    markdown-it-py's inline and reference rules take quadratic time on runs of ``[``
    (a 2 MB README of ``[`` did not finish in 75 s)."""
    return MarkdownIt("commonmark").disable(["inline", "reference"])


def _fences(text: str) -> list:
    """The fence tokens of ``text`` (none without a shell fence opener); raises LimitError."""
    if not SHELL_FENCE_OPENER.search(text) and not _UNTAGGED_COMMAND_FENCE.search(text):
        return []
    lines = text.count("\n") + 1
    if lines > MAX_LINES or len(text) > MAX_CHARS:
        from npu_migrate.pipeline.limits import LimitError

        raise LimitError(1, f"a Markdown file of {lines} lines and {len(text) >> 10} KB, more than the "
                            f"{MAX_LINES} lines / {MAX_CHARS >> 20} MB npu-migrate scans for shell commands; skipped")
    return [token for token in _parser().parse(text) if token.type == "fence" and token.map is not None]


def _is_shell(token) -> bool:
    """A fence tagged as shell, or one with no language whose every line (past blanks
    and comments) starts with a command: an untagged block of Python, YAML or output
    is not."""
    language = (token.info.split() or [""])[0].lower()
    if language:
        return language in SHELL_FENCES
    lines = [line.strip() for line in token.content.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    return bool(lines) and all(_COMMAND.match(line) or line.endswith("\\") or line.startswith("--")
                               for line in lines)


def shell_blocks(text: str, tokens: list | None = None) -> list[tuple[int, int, str]]:
    """``(line, indent, code)`` per shell-fenced block: ``line`` is the 1-based
    line of the block's first code line, ``indent`` the columns CommonMark took
    off its lines (a fence in a list item), placeholders blanked."""
    out = []
    source_lines = text.splitlines()
    for token in _fences(text) if tokens is None else tokens:
        language = (token.info.split() or [""])[0].lower()
        if not _is_shell(token):
            continue
        code = token.content
        if language in SESSION_FENCES:
            # the prompt becomes two blanks, so columns stay the file's
            code = "".join("  " + line[2:] if line.startswith("$ ") else "\n" for line in code.splitlines(keepends=True))
        fence = source_lines[token.map[0]]
        code = PLACEHOLDER.sub(lambda m: "_" * len(m.group()), code)
        out.append((token.map[0] + 2, len(fence) - len(fence.lstrip(" ")), code))
    return out


def migrate(path: str, data: bytes, settings: Settings) -> FileResult:
    """Never raises for bad input and never returns new source."""
    result = FileResult(path=path)
    text = data.decode("utf-8", "replace")
    tokens = _fences(text)
    for (first, indent, code), placeholders in zip(shell_blocks(text, tokens), _placeholders(tokens), strict=True):
        block = migrate_shell(path, code.encode("utf-8"), settings)
        lines = code.splitlines()
        for fix in block.fixes:
            line, col = _start(lines, fix.line, fix.col)
            result.findings.append(Finding(
                line=first + line - 1, col=col + indent, rule=fix.rule,
                message=f"what npu-migrate fixes in a script: {fix.message} ({NOTE})",
                suggestion="edit the command by hand as npu-migrate edits it in a script"))
        for finding in block.findings:
            result.findings.append(Finding(
                line=first + finding.line - 1, col=finding.col + indent, rule=finding.rule,
                # the suggestion shows `<num-of-gpus>`, not the blanks the shell parser saw
                message=f"{finding.message} ({NOTE})", suggestion=_restore(finding.suggestion, placeholders)))
    return result


def _placeholders(tokens: list) -> list[list[str]]:
    """The placeholders of each block :func:`shell_blocks` returns, in order."""
    out = []
    for token in tokens:
        if _is_shell(token):
            out.append(PLACEHOLDER.findall(token.content))
    return out


_BLANKED = re.compile(r"(?<![\w-])_{3,}(?![\w-])")


def _restore(text: str | None, placeholders: list[str]) -> str | None:
    """Put a block's placeholders back where a rule's text shows their blanks (each
    blank run takes the first unused placeholder of its length)."""
    if not text or not placeholders:
        return text
    left = list(placeholders)

    def back(match: re.Match) -> str:
        for index, placeholder in enumerate(left):
            if len(placeholder) == len(match.group()):
                return left.pop(index)
        return match.group()

    return _BLANKED.sub(back, text)


def _start(lines: list[str], line: int, col: int) -> tuple[int, int]:
    """Where a fix's words start: an edit that removes a continuation's last option
    begins at the previous line's ``\\``, one that removes a line's last option at
    the blank before it; the report names the option itself."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    # searched from col, not sliced: 37,000 fixes on one long command line made slicing
    # the rest of the line for each quadratic
    word = _NON_BLANK.search(text, col)  # col: 0-based, as in Fix
    rest_is_blank = word is None or (word.group() == "\\" and _NON_BLANK.search(text, word.end()) is None)
    if rest_is_blank and line < len(lines):
        following = lines[line]
        word = _NON_BLANK.search(following)
        return line + 1, word.start() if word else len(following)
    return line, word.start() if word else max(col, len(text))  # past the blanks the edit takes too


_NON_BLANK = re.compile(r"\S")
