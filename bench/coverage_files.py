"""Coverage audit of the repository files: configs, dependency files, notebooks and
shell launchers (``bench/repo_corpus.py``), the counterpart of the Python audit in
``bench/coverage.py``, which calls it.

On a scratch copy of the repository-files corpus: ``npu-migrate --write`` (the
migration), ``npu-migrate --check`` (idempotency: must exit 0), every output
must still be valid in its format, and every output is scanned for CUDA-isms
by a scanner of its own (not the tool's readers):

* config files: a YAML scalar (PyYAML's composer, so keys and values with their
  lines) or a JSON/TOML string that is exactly a CUDA device (``cuda``,
  ``cuda:N``), an nccl backend spec, a CUDA/NCCL environment variable (also as
  ``NAME=value``), accelerate's ``MULTI_GPU``, or Lightning's ``accelerator: gpu``;
* dependency files: a CUDA-only package (``npu_migrate/tables/packages.py``), a
  ``+cuXXX`` version, a CUDA wheel index, and a torch pinned to one minor
  release with no torch-npu in the file;
* notebooks: each code cell with the Python audit's token scanner (IPython
  lines blanked), and ``%env`` of a CUDA/NCCL variable;
* shell scripts: ``CUDA_VISIBLE_DEVICES``/``NCCL_*``, ``nvidia-smi``,
  ``torch.distributed.launch``, ``--backend nccl``, ``--device cuda`` outside
  comments.

A leftover is *reported* when the first run's report has a finding on its line
or, for a shell command continued over lines, on the line the command starts
(in notebooks: on its line of the same cell; the report gives positions of the
written files), else *silent*.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bench._common import (
    finding_line,
    idempotency_failures,
    load_report,
    markdown_table,
    npu_migrate_cmd,
    tally,
)
from bench.repo_corpus import RepoProject

_DEVICE = re.compile(r"cuda(?::\d+)?")
_NCCL = re.compile(r"nccl|(?:\w+:\w+,)*cuda:nccl(?:,\w+:\w+)*")
_ENV = re.compile(r"(CUDA_VISIBLE_DEVICES|NCCL_[A-Z0-9_]+)(?:=\S*)?")


@dataclass(frozen=True)
class FileHit:
    line: int            # 1-based; in a notebook, the line in the cell
    pattern: str
    cell: int | None = None
    first: int | None = None  # the first line of its statement (a shell command continued with \\)


@dataclass
class FileLeftover:
    path: str
    line: int
    cell: int | None
    pattern: str
    status: str          # reported / silent


@dataclass
class FilesAudit:
    files: int = 0
    changed: int = 0
    kinds: Counter = field(default_factory=Counter)
    before: Counter = field(default_factory=Counter)      # (kind, pattern) -> hits in the originals
    leftovers: list[FileLeftover] = field(default_factory=list)
    invalid_outputs: list[tuple[str, str]] = field(default_factory=list)
    idempotency_failures: list[str] = field(default_factory=list)
    tool_errors: list[tuple[str, str]] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    fixes: Counter = field(default_factory=Counter)
    findings: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def silent(self) -> list[FileLeftover]:
        return [x for x in self.leftovers if x.status == "silent"]

    def ok(self) -> bool:
        return not (self.silent or self.invalid_outputs or self.idempotency_failures or self.tool_errors)


# --------------------------------------------------------------------------- what a file is

def kind_of(path: str) -> str:
    from npu_migrate.pipeline import filetypes

    name = PurePosixPath(path).name
    if name.endswith((".sh", ".bash")):
        return "shell"
    found = filetypes.by_name(path)
    return found.name if found is not None else "other"


# --------------------------------------------------------------------------- scanners

def _strip_comment(line: str) -> str:
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def _value_hits(value: str, key: str | None) -> list[str]:
    found = []
    if _DEVICE.fullmatch(value) and key != "accelerator":
        found.append("cuda device value")
    if _NCCL.fullmatch(value):
        found.append("nccl value")
    if _ENV.fullmatch(value):
        found.append("CUDA/NCCL env var")
    if value == "MULTI_GPU":
        found.append("MULTI_GPU")
    if key == "accelerator" and value.lower() in ("gpu", "cuda"):
        found.append("accelerator gpu")
    return found


def scan_yaml(text: str) -> list[FileHit]:
    import yaml

    hits: list[FileHit] = []

    def visit(node, key):
        if isinstance(node, yaml.ScalarNode) and isinstance(node.value, str):
            hits.extend(FileHit(node.start_mark.line + 1, p) for p in _value_hits(node.value, key))
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                visit(item, key)
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and _ENV.fullmatch(str(k.value)):
                    hits.append(FileHit(k.start_mark.line + 1, "CUDA/NCCL env var"))
                visit(v, k.value if isinstance(k, yaml.ScalarNode) else None)

    for root in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if root is not None:
            visit(root, None)
    return hits


_QUOTED = re.compile(r"""(?:^|[\s\[{,=:])["']([^"'\n]*)["']""")
_TOML_KEY = re.compile(r"^\s*(CUDA_VISIBLE_DEVICES|NCCL_[A-Z0-9_]+)\s*=")


def scan_quoted(text: str, toml: bool) -> list[FileHit]:
    """JSON and TOML: quoted strings, and in TOML bare keys that are variables."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        body = _strip_comment(line) if toml else line
        key_match = re.match(r"""\s*["']?([\w.\-]+)["']?\s*[:=]""", body)
        key = key_match.group(1) if key_match else None
        for match in _QUOTED.finditer(body):
            hits.extend(FileHit(number, p) for p in _value_hits(match.group(1), key if match.start() > 0 else None))
        if toml and _TOML_KEY.match(body):
            hits.append(FileHit(number, "CUDA/NCCL env var"))
    return hits


def scan_deps(path: str, text: str) -> list[FileHit]:
    from packaging.requirements import InvalidRequirement, Requirement

    from npu_migrate.deps.pairing import minor_series
    from npu_migrate.tables.packages import (
        CONDA_CUDA_ONLY,
        CUDA_INDEX_URL,
        CUDA_LOCAL_VERSION,
        cuda_only,
        normalise,
    )

    hits = []
    torch_lines = []
    has_npu = re.search(r"torch[-_]npu", text) is not None
    conda = PurePosixPath(path).name.startswith("environment")
    for number, line in enumerate(text.splitlines(), start=1):
        body = _strip_comment(line).strip().strip(",").strip()
        body = re.sub(r"^-\s+", "", body) if conda else body
        candidate = body.strip("\"'")
        if re.search(r"^[\w.\[\]-]+\s*=(?!=)", candidate) and not conda:
            candidate = re.sub(r"^[\w.\[\]-]+\s*=(?!=)\s*", "", candidate).strip("\"'")  # setup.cfg `key = value`
        if CUDA_INDEX_URL.search(body):
            hits.append(FileHit(number, "CUDA index"))
        if conda and candidate == "nvidia":
            hits.append(FileHit(number, "CUDA index"))
        try:
            requirement = Requirement(candidate)
        except InvalidRequirement:
            name = re.split(r"[=<>\s]", candidate, maxsplit=1)[0]
            if conda and normalise(name) in CONDA_CUDA_ONLY:
                hits.append(FileHit(number, "CUDA-only package"))
            continue
        if cuda_only(requirement.name) or (conda and normalise(requirement.name) in CONDA_CUDA_ONLY):
            hits.append(FileHit(number, "CUDA-only package"))
        if CUDA_LOCAL_VERSION.search(str(requirement.specifier)):
            hits.append(FileHit(number, "+cu version"))
        if normalise(requirement.name) == "torch" and minor_series(requirement.specifier):
            torch_lines.append(number)
    if not has_npu:
        hits.extend(FileHit(n, "torch without torch-npu") for n in torch_lines)
    return hits


_MAGIC = re.compile(r"^\s*[%!?]")
_ENV_MAGIC = re.compile(r"^\s*%(?:env|set_env)\s+(CUDA_VISIBLE_DEVICES|NCCL_[A-Z0-9_]+)")


def scan_notebook(data: bytes) -> list[FileHit]:
    from bench.coverage import scan as scan_python

    hits = []
    for index, cell in enumerate(json.loads(data)["cells"]):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines = source.splitlines()
        if lines and lines[0].startswith("%%"):
            continue
        for number, line in enumerate(lines, start=1):
            if _ENV_MAGIC.match(line):
                hits.append(FileHit(number, "%env CUDA/NCCL variable", index))
        code = "\n".join("" if _MAGIC.match(line) else line for line in lines) + "\n"
        try:
            hits.extend(FileHit(h.line, h.pattern, index) for h in scan_python(code.encode()))
        except (SyntaxError, ValueError):
            continue
    return hits


_SHELL = (
    (re.compile(r"\bCUDA_VISIBLE_DEVICES\b|\bNCCL_[A-Z0-9_]+"), "CUDA/NCCL env var"),
    (re.compile(r"\bnvidia-smi\b"), "nvidia-smi"),
    (re.compile(r"torch\.distributed\.launch"), "torch.distributed.launch"),
    (re.compile(r"--(?:dist[-_])?backend[= ]+['\"]?nccl\b"), "nccl argument"),
    (re.compile(r"--device[= ]+['\"]?cuda\b"), "cuda argument"),
)


def scan_shell(text: str) -> list[FileHit]:
    hits = []
    first = None
    for number, line in enumerate(text.splitlines(), start=1):
        first = first or number
        body = _strip_comment(line)
        if not re.match(r"\s*echo\b", body):
            hits.extend(FileHit(number, name, first=first) for pattern, name in _SHELL if pattern.search(body))
        if not line.rstrip().endswith("\\"):
            first = None
    return hits


def scan(path: str, data: bytes) -> list[FileHit]:
    kind = kind_of(path)
    text = data.decode("utf-8", "replace")
    if kind == "notebook":
        return scan_notebook(data)
    if kind == "deps":
        hits = scan_deps(path, text)
        if path.endswith((".yml", ".yaml")):
            hits += [h for h in scan_yaml(text) if h.pattern != "nccl value"]
        return hits
    if kind == "config":
        if path.endswith((".yml", ".yaml")):
            return scan_yaml(text)
        return scan_quoted(text, toml=path.endswith(".toml"))
    if kind == "shell":
        return scan_shell(text)
    return []


def _valid(path: str, data: bytes) -> str | None:
    """Why ``data`` is no longer valid in its format (None: it is)."""
    import tomllib
    import yaml

    try:
        if path.endswith(".ipynb"):
            import nbformat

            nbformat.validate(nbformat.reads(data.decode(), as_version=4))
        elif path.endswith((".yaml", ".yml")):
            list(yaml.compose_all(data.decode(), Loader=yaml.SafeLoader))
        elif path.endswith(".json"):
            json.loads(data)
        elif path.endswith(".toml"):
            tomllib.loads(data.decode())
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


# --------------------------------------------------------------------------- the audit

def _findings(entry: dict) -> set[tuple[int | None, int]]:
    """(cell, line) of the findings of one report entry: positions of the written file
    (the tool moves them there after --write, cell by cell in a notebook)."""
    return {(finding["cell"] - 1 if finding.get("cell") else None, finding_line(finding))  # cells count from 1
            for finding in entry.get("findings") or []}


def audit_files(projects: list[RepoProject], jobs: int = 0, log=print) -> FilesAudit:
    result = FilesAudit()
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-coverage-files-"))
    try:
        keys = []
        for project in projects:
            for rel in project.files:
                key = f"{project.label}/{rel}"
                (work / key).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(project.root / rel, work / key)
                keys.append((project, rel, key))
                result.kinds[kind_of(rel)] += 1
        result.files = len(keys)
        targets = [p.label for p in projects]
        jobs_args = ["--jobs", str(jobs)] if jobs else []
        r1, r2 = work / "report-write.json", work / "report-check.json"
        log(f"npu-migrate --write on a scratch copy of {len(keys):,} repository files ...")
        start = time.perf_counter()
        subprocess.run(npu_migrate_cmd() + targets + ["--write", "--no-diff", "--no-cache", "-q", "--report", str(r1)]
                       + jobs_args, check=False, cwd=work, capture_output=True, text=True, errors="replace", timeout=3600)
        result.seconds = time.perf_counter() - start
        rep1 = load_report(r1)["by_path"]
        proc2 = subprocess.run(npu_migrate_cmd() + targets + ["--check", "--no-diff", "--no-cache", "-q", "--report",
                                                              str(r2)] + jobs_args,
                               check=False, cwd=work, capture_output=True, text=True, errors="replace", timeout=3600)
        rep2 = load_report(r2)["by_path"] if r2.is_file() else {}
        result.idempotency_failures = idempotency_failures(rep2, proc2.returncode)
        tally(rep1, result.fixes, result.findings, result.tool_errors)
        for project, rel, key in keys:
            kind = kind_of(rel)
            if key not in rep1 and kind != "shell":
                result.unlisted.append(key)
            orig = (project.root / rel).read_bytes()
            out = (work / key).read_bytes()
            result.changed += orig != out
            if orig != out and _valid(rel, orig) is None:
                problem = _valid(rel, out)
                if problem:
                    result.invalid_outputs.append((key, problem))
            try:
                before, after = scan(rel, orig), scan(rel, out)
            except Exception as exc:  # noqa: BLE001 - a file the scanner cannot read is not audited
                log(f"  not scanned: {key}: {type(exc).__name__}")
                continue
            for hit in before:
                result.before[(kind, hit.pattern)] += 1
            found = _findings(rep1.get(key) or {})
            for hit in after:
                lines = range(hit.first or hit.line, hit.line + 1)  # a finding sits where its statement starts
                reported = any((hit.cell, n) in found for n in lines)
                result.leftovers.append(FileLeftover(key, hit.line, hit.cell, hit.pattern,
                                                     "reported" if reported else "silent"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def render_files(a: FilesAudit, projects: list[RepoProject]) -> str:
    labels = ", ".join(p.label for p in projects)
    left = Counter((kind_of(x.path), x.pattern) for x in a.leftovers)
    silent = Counter((kind_of(x.path), x.pattern) for x in a.silent)
    rows = [[kind, pattern, a.before[(kind, pattern)], left[(kind, pattern)],
             left[(kind, pattern)] - silent[(kind, pattern)], silent[(kind, pattern)]]
            for kind, pattern in sorted(set(a.before) | set(left))]
    rows.append(["**total**", "", sum(a.before.values()), len(a.leftovers), len(a.leftovers) - len(a.silent),
                 len(a.silent)])
    lines = [
        "# Coverage audit: repository files", "",
        f"Sdists: {labels} ({a.files:,} files: "
        + ", ".join(f"{n} {k}" for k, n in sorted(a.kinds.items())) + f"); {a.changed} changed by --write "
        f"in {a.seconds:.1f} s.", "",
        markdown_table(["type", "pattern", "before", "left after", "reported", "silent"], rows), "",
        (f"- invalid outputs: {len(a.invalid_outputs)}; idempotency failures: {len(a.idempotency_failures)}; "
         f"files that failed: {len(a.tool_errors)}; files the tool did not list: {len(a.unlisted)}"),
        "- fixes: " + ", ".join(f"{r} x{n}" for r, n in sorted(a.fixes.items())),
        "- findings: " + ", ".join(f"{r} x{n}" for r, n in sorted(a.findings.items())), "",
    ]
    for x in a.silent:
        where = f" (cell {x.cell + 1})" if x.cell is not None else ""
        lines.append(f"- silent: `{x.path}:{x.line}`{where} {x.pattern}")
    for key, problem in a.invalid_outputs + a.tool_errors:
        lines.append(f"- failed: `{key}`: {problem}")
    return "\n".join(lines) + "\n"
