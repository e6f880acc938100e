"""What a file is *for*, decided from its path (and, for data files, its shape), the
same way whatever paths the run was given.

* **CI files** (:func:`is_ci_file`): workflows and pipeline definitions run on the
  CI's own runners, which stay NVIDIA machines until the team moves them. Every
  rewrite a rule would make there (a matrix value ``device: "cuda"``, an env rename
  ``CUDA_VISIBLE_DEVICES`` -> ``ASCEND_RT_VISIBLE_DEVICES``) becomes a finding and the
  file stays byte-identical (:func:`report_only`).
* **Templates by their place** (:func:`template_place`): config files under a Helm
  chart's ``templates/`` or a ``{{cookiecutter...}}`` folder are skipped by the config
  front end (``npu_migrate/configs/templates.py``, which also knows templates by
  their text). docs/decisions.md, "Templates".
* **Data files** (:func:`data_file_reason`): results, metrics, benchmark outputs and
  datasets are neither configuration nor code; they are skipped (no rule runs, no
  error) and the summary counts them in one line. docs/decisions.md, "Data files".
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import replace

from npu_migrate.pipeline.model import FileResult, Finding

# -- tests ---------------------------------------------------------------------------

#: Test modules by pytest's and unittest's naming conventions
_TEST_NAME = re.compile(r"(?:test_.*|.*_test|conftest|tests?)\.py")
_TEST_DIRS = frozenset({"test", "tests", "testing"})


@functools.lru_cache(maxsize=8192)
def is_test_path(path: str) -> bool:
    """``path`` is a test module: named ``test_*.py``, ``*_test.py``, ``conftest.py``,
    ``test(s).py``, or inside a ``test/``, ``tests/`` or ``testing/`` folder of its
    project. The folders are read from the project root down (:func:`~npu_migrate.
    pipeline.config.project_root`), so a checkout under ``/home/ci/tests/`` is not all
    tests, and every way of naming the file gives the same answer."""
    from npu_migrate.pipeline.config import project_root

    parts = os.path.relpath(os.path.abspath(path), project_root(path)).replace(os.sep, "/").split("/")
    return bool(_TEST_NAME.fullmatch(parts[-1])) or any(part in _TEST_DIRS for part in parts[:-1])


# -- CI ------------------------------------------------------------------------------

#: Directories whose every file belongs to a CI system (a path component, anywhere).
_CI_DIRS = frozenset({".github", ".circleci", ".buildkite", ".gitlab", ".azure-pipelines", ".woodpecker",
                      ".drone", ".travis", ".gitea", ".forgejo"})
#: File names of CI pipeline definitions (matched on the base name, lower case).
_CI_NAMES = re.compile(
    r"""(?:\.gitlab-ci(?:[.-][\w.-]*)?\.ya?ml|jenkinsfile(?:[.-][\w.-]*)?|azure-pipelines?(?:[.-][\w.-]*)?\.ya?ml
       |\.travis\.ya?ml|bitbucket-pipelines\.ya?ml|\.drone\.ya?ml|appveyor\.ya?ml|\.woodpecker\.ya?ml
       |cloudbuild(?:[.-][\w.-]*)?\.ya?ml|codefresh\.ya?ml|\.cirrus\.ya?ml)""",
    re.VERBOSE,
)


def is_ci_file(path: str) -> bool:
    """``path`` belongs to a CI system: under ``.github/``, ``.circleci/``,
    ``.buildkite/``, ``.gitlab/``..., or named ``.gitlab-ci.yml``, ``Jenkinsfile``,
    ``azure-pipelines.yml``, ``.travis.yml``, ``bitbucket-pipelines.yml``..."""
    parts = os.path.normpath(path).replace("\\", "/").split("/")
    if any(part in _CI_DIRS for part in parts[:-1]):
        return True
    return bool(_CI_NAMES.fullmatch(parts[-1].lower()))


CI_SUGGESTION = ("CI runners stay NVIDIA machines until the team moves this job to Ascend runners; "
                 "make this change then (or add an Ascend job beside it)")


TEMPLATE_SUGGESTION = ("edit the template by hand (what it renders here comes from its values), or render it "
                       "(`helm template`, `cookiecutter --no-input`) and run npu-migrate on the output")


def report_only(result: FileResult, what: str = "CI file", suggestion: str = CI_SUGGESTION) -> FileResult:
    """``result`` with every fix turned into a finding of the same rule and the file
    left as it is (a CI file; a template, ``npu_migrate/configs/engine.py``)."""
    if not result.fixes:
        return result
    findings = [Finding(f.line, f.col, f.rule, f"{what}, left unchanged: {f.message}", suggestion,
                        f.end_line, f.end_col, f.cell) for f in result.fixes]
    merged = sorted({*result.findings, *findings})
    return replace(result, fixes=[], findings=merged, new_source=None)


# -- CUDA modules beside the project's own Ascend ones ---------------------------------

#: A CUDA or NCCL word in a module's file name, and what the project's Ascend sibling says
#: instead (``nccl_checkpoint_engine.py`` beside ``hccl_checkpoint_engine.py``).
_CUDA_NAME_WORD = re.compile(r"(?<![a-z0-9])(cuda|nccl|gpu)(?![a-z0-9])", re.IGNORECASE)
_ASCEND_WORDS = {"cuda": ("npu", "ascend"), "nccl": ("hccl",), "gpu": ("npu", "ascend")}


_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")
#: How many folders above a file may be the CUDA twin of an Ascend folder
#: (``scripts/text_condition/gpu/sample.sh`` beside ``.../npu/``).
_TWIN_DEPTH = 3


def ascend_twins(name: str) -> list[str]:
    """``name`` with one of its CUDA words said the Ascend way (``npu_ops.py`` and
    ``ascend_ops.py`` for ``cuda_ops.py``)."""
    return [name[:match.start()] + word + name[match.end():]
            for match in _CUDA_NAME_WORD.finditer(name) for word in _ASCEND_WORDS[match.group(1).lower()]]


@functools.lru_cache(maxsize=4096)
def _twin_folder(folder: str) -> str | None:
    """The Ascend twin of ``folder`` or of one of the folders just above it, as
    ``npu/`` (the project keeps a ``gpu/`` and an ``npu/`` folder of launchers side by side)."""
    for _ in range(_TWIN_DEPTH):
        parent, name = os.path.split(folder)
        if not name or parent == folder or any(os.path.exists(os.path.join(folder, m)) for m in _PROJECT_MARKERS):
            return None  # not above the project's root: a checkout under /home/gpu/ beside /home/npu/
        for twin in ascend_twins(name):
            if os.path.isdir(os.path.join(parent, twin)):
                return twin + "/"
        folder = parent
    return None


def ascend_sibling(path: str) -> str | None:
    """The project's own Ascend counterpart of the CUDA file ``path``, or None: the file
    beside it named the Ascend way (``hccl_checkpoint_engine.py`` for
    ``nccl_checkpoint_engine.py``, ``npu_ops.py`` for ``cuda_ops.py``, ``train_npu.sh`` for
    ``train_gpu.sh``; ``run_npu.sh`` for ``run.sh``, a name without a CUDA word), or the folder beside one of its folders (``npu/`` beside the ``gpu/``
    that holds it: Open-Sora-Plan's ``scripts/text_condition/{gpu,npu}/``). Such a project
    has written its Ascend path itself: the CUDA file is that backend's, not code to
    migrate (held-out round 15: its GPU launchers had lost their CUDA device mask)."""
    folder, name = os.path.split(os.path.abspath(path))
    for sibling in ascend_twins(name) or _suffixed_twins(name):
        if os.path.isfile(os.path.join(folder, sibling)):
            return sibling
    return _twin_folder(folder)


#: dependency files, which a platform's own list includes rather than replaces
_LAYERED_SUFFIXES = (".txt", ".in", ".toml", ".cfg", ".lock")
_LAYERED_STEMS = ("requirements", "environment", "setup", "constraints")


def _suffixed_twins(name: str) -> list[str]:
    """``run_npu.sh``, ``run-npu.sh``, ``run_ascend.sh`` and ``npu_run.sh`` for ``run.sh``, a
    name without a CUDA word: wenet keeps ``run_npu.sh`` beside each recipe's ``run.sh``,
    whose renamed ``nccl`` and visibility list were that recipe's NVIDIA launcher's
    (held-out round 24)."""
    stem, ext = os.path.splitext(name)
    if not stem or stem.startswith(".") or ext in _LAYERED_SUFFIXES or stem.startswith(_LAYERED_STEMS):
        # dependency lists are layered, not twins: `requirements-npu.txt` adds to the
        # `requirements.txt` it includes (`-r requirements.txt`), which both platforms install
        return []
    return [f"{stem}_npu{ext}", f"{stem}-npu{ext}", f"{stem}_ascend{ext}", f"npu_{stem}{ext}"]


def left_to_sibling(result: FileResult, sibling: str) -> FileResult:
    """``result`` of a file with an Ascend sibling (:func:`ascend_sibling`), left as it is:
    its fixes and findings (its NCCL settings are CUDA's to keep) become one informational
    finding (NPU010) at the first of them."""
    if not result.fixes and not result.findings:
        return result
    first = min([*result.fixes, *result.findings], key=lambda f: (f.line, f.col))
    note = Finding(first.line, first.col, SIBLING_RULE,
                   f"this file is CUDA's beside the project's own Ascend one (`{sibling}`); left unchanged",
                   "nothing to migrate here", first.end_line, first.end_col, first.cell)
    return replace(result, fixes=[], findings=[note], new_source=None)


#: the rule that reports code left alone because it already handles the NPU
SIBLING_RULE = "NPU010"


# -- data files ----------------------------------------------------------------------

#: Directory names that hold outputs and datasets rather than configuration.
DATA_DIRS = frozenset({"results", "result", "metrics", "outputs", "output", "logs", "runs", "predictions",
                       "datasets", "dataset", "data", "benchmarks", "benchmark", "bench_results", "eval_results",
                       "wandb", "mlruns", "lightning_logs", "leaderboard"})
#: Words of a file's stem that name an output (``run_results.json``, ``metrics.json``,
#: ``eval-scores.yaml``, ``benchmark_llama.json``).
_DATA_STEM = re.compile(
    r"(?:^|[_\-.])(?:results?|metrics?|scores?|predictions?|preds|outputs?|evals?|evaluation|benchmarks?|bench"
    r"|leaderboard|history|stats|statistics|logs?|samples|dataset|data|records|responses|generations|trace)(?:$|[_\-.])")
#: For YAML, only the words that name an output: a YAML file named for a task
#: (``default_eval.yaml``, Beaker's and AReaL's eval specs, ``bench.yaml``) is its
#: configuration, and results are seldom written as YAML.
_YAML_DATA_STEM = re.compile(
    r"(?:^|[_\-.])(?:results?|metrics?|scores?|predictions?|preds|outputs?|leaderboard|history|stats|statistics"
    r"|logs?|samples|records|responses|generations|trace)(?:$|[_\-.])")
#: ... unless the stem also says it is configuration (``eval_config.json``, ``bench_args.yaml``).
_CONFIG_STEM = re.compile(r"(?:^|[_\-.])(?:config|configs|cfg|conf|args|arguments|settings|params|hparams|hyperparams"
                          r"|deepspeed|ds|zero\d?|accelerate|fsdp|launch|recipe|train|training|sweep|env)(?:$|[_\-.\d])")
#: A JSON document that is an array of records: ``[`` then ``{`` (JSON Lines need no test).
_RECORDS = re.compile(rb"\A\s*\[\s*\{")
#: A JSON file this large is data whatever its name (HF ``config.json`` files are a few KiB).
DATA_SIZE = 1 << 20

#: The suffixes this applies to: the formats the config front end reads as documents.
_JSON = (".json",)
_LINES = (".jsonl", ".ndjson")
_YAML = (".yaml", ".yml")


def data_file_reason(path: str, data: bytes) -> str | None:
    """Why ``path`` is a data file (results, metrics, a dataset), or None for a file
    that may be configuration. The criterion (docs/decisions.md, "Data files"):

    * JSON Lines (``.jsonl``, ``.ndjson``) always;
    * JSON that is an array of records (``[{...}, ...]``) or over 1 MiB;
    * JSON under a directory named for outputs or data (``results/``, ``metrics/``,
      ``benchmarks/``, ``outputs/``, ``data/``...) or whose stem names an output
      (``*_results.json``, ``metrics.json``, ``eval_scores.json``), unless the stem
      also names configuration (``eval_config.json``, ``bench_args.json``);
    * YAML only by its stem naming an output (``results.yaml``, ``metrics.yml``; not a
      task: ``default_eval.yaml`` is an eval's configuration; a directory name is not
      enough: ``benchmarks/llama.yaml`` is usually a recipe) or over 1 MiB.
    """
    lower = path.lower()
    name = os.path.basename(lower)
    stem, suffix = os.path.splitext(name)
    if suffix in _LINES:
        return "JSON Lines"
    if suffix not in _JSON + _YAML:
        return None
    if len(data) > DATA_SIZE:
        return "over 1 MiB"
    configured = _CONFIG_STEM.search(stem) is not None
    if suffix in _JSON:
        if _RECORDS.match(data):
            return "an array of records"
        if configured:
            return None
        parts = os.path.normpath(lower).replace("\\", "/").split("/")[:-1]
        folder = next((p for p in parts if p in DATA_DIRS), None)
        if folder is not None:
            return f"under {folder}/"
    elif configured:
        return None
    if (_DATA_STEM if suffix in _JSON else _YAML_DATA_STEM).search(stem):
        return "its name says results or metrics"
    return None


# -- templates -----------------------------------------------------------------------

#: The file a Helm chart is named by (Helm reads no other spelling).
_CHART = "Chart.yaml"


#: as :data:`npu_migrate.pipeline.filetypes.TEMPLATE_SUFFIXES` (not imported: file_roles
#: stays below filetypes)
_JINJA_SUFFIXES = (".j2", ".jinja", ".jinja2")


def template_place(path: str) -> str | None:
    """Why the file at ``path`` is a template by its place (a Helm chart's
    ``templates/``, a path part with ``{{ }}``), or None."""
    parts = os.path.abspath(path).replace(os.sep, "/").split("/")
    if parts[-1].lower().endswith(_JINJA_SUFFIXES):
        return f"a Jinja template: its name ends in {parts[-1][parts[-1].rfind('.'):]}"
    if any("{{" in part and "}}" in part for part in parts):
        return "a project template: its path has {{ }}"
    for depth in range(len(parts) - 2, 0, -1):  # the file's own folder first
        # one stat per folder named templates (not cached: a chart may appear between runs)
        if parts[depth] == "templates" and os.path.isfile(os.path.join("/".join(parts[:depth]) or "/", _CHART)):
            return f"a Helm chart template: under templates/ beside {_CHART}"
    return None
