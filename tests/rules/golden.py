"""Golden fixtures: ``fixtures/rules/<RULE>/<case>.before.<ext>`` -> ``<case>.after.<ext>``,
and ``<case>.unchanged.<ext>`` that must stay byte-identical. The extension picks
the front end as for any file (``.py``, ``.sh``, ``.Dockerfile``...).

Each fixture runs with only its rule (plus NPU100, which adds ``import torch_npu``)
selected, unless one of its first lines says ``# npu-migrate-test: select=CODES``.
Expected findings are written as ``# expect: NPU102`` (comma-separated): at the
end of the line they must be reported on, or on a comment line of its own for
the next line that is neither blank nor a comment (formats such as Dockerfiles
have no comments at the end of a line); JSON fixtures write them as ``// expect:``
comments (JSON with comments, as VS Code's files are).

The front end is picked by the name the fixture stands for (:func:`real_name`:
``requirements.before.txt`` is a ``requirements.txt``,
``gpu--pyproject.before.toml`` a ``pyproject.toml``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from npu_migrate.pipeline import filetypes
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
_EXPECT = re.compile(r"(?:#|//).*\bexpect:\s*([A-Z0-9, ]+)")
_SELECT = re.compile(r"#\s*npu-migrate-test:\s*select=([A-Za-z0-9,]+)")
#: ``# npu-migrate-test: requirements=timm>=1.0.12``: the project's requirements.txt
#: holds that line (rules that read project facts, NPU923)
_REQUIREMENTS = re.compile(r"#\s*npu-migrate-test:\s*requirements=(\S+)")
#: ``# npu-migrate-test: project``: the fixture is scanned for project facts as the
#: project's only file (NPU920 reads whether it registers its own attention classes)
_PROJECT = re.compile(r"#\s*npu-migrate-test:\s*project\b")
#: ``# npu-migrate-test: imports-runtime``: the run's code imports npu_runtime (the
#: project fact NPU854/NPU862 act on; fixtures/declared/ has whole repositories).
_IMPORTS_RUNTIME = re.compile(r"#\s*npu-migrate-test:.*\bimports-runtime\b")
_KINDS = (".before.", ".unchanged.")


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    before: Path
    after: Path | None  # None: must stay unchanged

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.name}"

    def settings(self) -> Settings:
        head = self.before.read_text(encoding="utf-8", errors="replace").split("\n", 5)[:5]
        match = next(filter(None, map(_SELECT.search, head)), None)
        select = match.group(1).split(",") if match else [self.rule, "NPU100"]
        settings = Settings(selection=Selection.create(select))
        requirement = next(filter(None, map(_REQUIREMENTS.search, head)), None)
        project = any(map(_PROJECT.search, head))
        if requirement is not None or project:
            from dataclasses import replace

            from npu_migrate.pipeline.facts import ProjectFacts

            sources = [("requirements.txt", requirement.group(1).encode() + b"\n")] if requirement else []
            if project:
                sources.append((str(self.before), self.before.read_bytes()))
            settings = replace(settings, facts=ProjectFacts.scan(sources))
        if any(map(_IMPORTS_RUNTIME.search, head)):
            from dataclasses import replace

            from npu_migrate.pipeline import runtime_bundle

            settings = replace(settings, facts=replace(settings.facts, runtime_requirement=runtime_bundle.requirement()))
        return settings


def cases() -> list[Case]:
    found = []
    for rule_dir in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        for path in sorted(rule_dir.iterdir()):
            if ".before." in path.name:
                name, ext = path.name.split(".before.", 1)
                found.append(Case(rule_dir.name, f"{name}.{ext}" if ext != "py" else name, path,
                                  rule_dir / f"{name}.after.{ext}"))
            elif ".unchanged." in path.name:
                name, ext = path.name.split(".unchanged.", 1)
                found.append(Case(rule_dir.name, f"{name}.{ext}" if ext != "py" else name, path, None))
    return found


def expected_findings(source: str) -> set[tuple[int, str]]:
    """``(line, rule)`` of every ``# expect:`` mark; in a notebook, lines are those of
    the marks' code cells."""
    if source.lstrip().startswith("{") and '"cells"' in source:
        cells = json.loads(source)["cells"]
        return {found for cell in cells if cell["cell_type"] == "code"
                for found in expected_findings("".join(cell["source"]))}
    out = set()
    pending: list[str] = []
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if pending and stripped and not stripped.startswith(("#", "//")):
            out.update((number, code) for code in pending)
            pending = []
        match = _EXPECT.search(line)
        if not match:
            continue
        codes = [code.strip() for code in match.group(1).split(",") if code.strip()]
        if stripped.startswith(("#", "//")) and not stripped.startswith("#SBATCH"):
            pending.extend(codes)  # a comment line of its own: the next line (a Slurm directive is its own)
        else:
            out.update((number, code) for code in codes)
    return out


def migrate_file(path: str, data: bytes, settings: Settings):
    """Migrate ``data`` as the file ``path`` (its name picks the front end). A notebook
    given as code (a rule's documented example) is migrated as a notebook whose only
    cell is that code, and the result is that cell's code again."""
    file_type = filetypes.detect(path, data[: filetypes.HEAD_BYTES]) or filetypes.PYTHON
    if file_type.name == "notebook" and not data.lstrip().startswith(b"{"):
        return _as_cell(path, data, settings, file_type)
    return file_type.migrate()(path, data, settings)


def _as_cell(path: str, data: bytes, settings: Settings, file_type):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(data.decode())])
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    result = file_type.migrate()(path, nbformat.writes(notebook).encode(), settings)
    if result.new_source is not None:
        result.new_source = nbformat.reads(result.new_source.decode(), as_version=4).cells[0].source.encode()
    return result


def real_name(path: Path) -> str:
    """The name the fixture stands for: ``pyproject.before.toml`` is a ``pyproject.toml``,
    ``gpu--setup.unchanged.cfg`` a ``setup.cfg`` (a case name before ``--``)."""
    name = path.name
    for kind in (".before.", ".after.", ".unchanged."):
        name = name.replace(kind, ".")
    return str(path.parent / name.split("--", 1)[-1])


def migrate(path: Path, settings: Settings):
    result = migrate_file(real_name(path), path.read_bytes(), settings)
    assert result.error is None, result.error
    return result
