"""Config files that are templates, not configuration: what a template engine reads
before it writes the YAML, JSON or TOML a program loads (docs/decisions.md, "Templates").

* **By their place** (:func:`npu_migrate.pipeline.file_roles.template_place`, a
  file's role by its path, also part of its cache key): every file under the ``templates/``
  folder of a Helm chart (a folder beside ``Chart.yaml``, at any depth below it), and
  every file of a project template whose path has a ``{{ ... }}`` part (cookiecutter's
  ``{{cookiecutter.project_slug}}/``, copier's ``{{ project_name }}/``). Such a file is
  a template even when it happens to parse: rewriting its text could break the
  template, and what it renders to is not its text.
* **By their text** (:func:`has_markers`): a file its parser refuses that holds a
  template marker (``{{`` before a ``}}``, or ``{%`` before a ``%}``): Go templates,
  Jinja (Ansible, cookiecutter, SaltStack), Helm outside a chart. A file that parses
  is read as it is (a GitHub workflow's ``${{ matrix.device }}`` is a string of a
  valid file), and a file without a marker that does not parse is still an error.

Templates are skipped (nothing is written, no error) and counted in one line of the
summary. They are still reported on: the config rules read the template with its actions
blanked out (:func:`neutralize`), and what they would rewrite becomes a finding
(``npu_migrate/configs/engine.py``). Render them (``helm template``, ``cookiecutter
--no-input``) and run npu-migrate on what they render to for the rewrites.
"""

from __future__ import annotations

import re


def has_markers(data: bytes) -> bool:
    """``data`` holds ``{{`` followed somewhere by ``}}``, or ``{%`` followed by ``%}``
    (linear: two ``find`` calls per marker)."""
    for opening, closing in ((b"{{", b"}}"), (b"{%", b"%}")):
        at = data.find(opening)
        if at >= 0 and data.find(closing, at + 2) >= 0:
            return True
    return False


#: The opening of a template action (``{{``, ``{%``, ``{#``) and the closing of each.
_OPENING = re.compile(rb"\{[{%#]")
_CLOSING = {b"{{": b"}}", b"{%": b"%}", b"{#": b"#}"}


def neutralize(data: bytes) -> bytes:
    """``data`` with every template action blanked out, byte for byte (same length, same
    lines), so that the YAML a template writes around its actions can be read for
    findings: an action alone on its lines (``{{- if .Values.gpu.enabled }}``, ``{{-
    include ... | nindent 4 }}``) becomes a comment, one inside a line (``nvidia.com/gpu:
    {{ .Values.gpu.count }}``) a plain word of ``x``. What the template renders there is
    unknown, so nothing read this way is ever rewritten."""
    out = bytearray(data)
    for start, end in _actions(data):
        alone = _alone(data, start, end)
        for at in range(start, end):
            if out[at] != 0x0A:  # "\n"
                out[at] = 0x20 if alone else 0x78  # " " / "x"
        if alone:  # a comment on each line the action spans
            at = start
            while at < end:
                if data[at] != 0x0A:  # an empty line inside the action stays empty
                    out[at] = 0x23  # "#"
                nxt = data.find(b"\n", at, end)
                if nxt < 0:
                    break
                at = nxt + 1
                while at < end and data[at] in b" \t":
                    at += 1
    return bytes(out)


#: How far from an action its line is searched for other text: indentation is shorter, and
#: a bound keeps a long line of actions linear (each one looks at most this far).
_ALONE_SPAN = 256


def _alone(data: bytes, start: int, end: int) -> bool:
    """Only blanks share the action's first and last lines with it."""
    before = data.rfind(b"\n", max(0, start - _ALONE_SPAN), start)
    if before < 0 and start > _ALONE_SPAN:
        return False
    after = data.find(b"\n", end, end + _ALONE_SPAN)
    if after < 0 and len(data) - end > _ALONE_SPAN:
        return False
    return not data[before + 1:start].strip() and not data[end:len(data) if after < 0 else after].strip()


def _actions(data: bytes):
    """``(start, end)`` of each complete action, in one pass: an opening whose closing is
    missing is searched for once per kind (a lazy ``{{.*?}}`` would rescan the rest of
    the file for each opening, quadratic on a file of ``{{``)."""
    at = 0
    unclosed: set[bytes] = set()  # openings with no closing anywhere after: searched once
    while (found := _OPENING.search(data, at)) is not None:
        start, opening = found.start(), found.group()
        close = -1 if opening in unclosed else data.find(_CLOSING[opening], start + 2)
        if close < 0:
            unclosed.add(opening)
            at = start + 1
            continue
        yield start, close + 2
        at = close + 2
