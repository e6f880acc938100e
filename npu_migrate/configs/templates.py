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

Templates are skipped (no rule runs, nothing is written, no error) and counted in one
line of the summary; no text-level finder reads them (the config rules read parsed
scalars): render them (``helm template``, ``cookiecutter --no-input``) and run
npu-migrate on what they render to.
"""

from __future__ import annotations


def has_markers(data: bytes) -> bool:
    """``data`` holds ``{{`` followed somewhere by ``}}``, or ``{%`` followed by ``%}``
    (linear: two ``find`` calls per marker)."""
    for opening, closing in ((b"{{", b"}}"), (b"{%", b"%}")):
        at = data.find(opening)
        if at >= 0 and data.find(closing, at + 2) >= 0:
            return True
    return False
