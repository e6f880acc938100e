"""The dependency-file front end: which files it takes, the torch-npu pairing
decision, insertions that keep every other byte (tomlkit in pyproject.toml),
bad input, and hypothesis properties over generated requirement lists."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.deps import pairing
from npu_migrate.deps.engine import migrate
from npu_migrate.pipeline import filetypes
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

ALL = Settings(selection=Selection.create(["ALL"]))


def run(name: str, text: str | bytes, settings: Settings = ALL):
    return migrate(name, text.encode() if isinstance(text, str) else text, settings)


@pytest.mark.parametrize(
    "name,kind",
    [
        ("requirements.txt", "deps"), ("requirements-dev.txt", "deps"), ("dev-requirements.txt", "deps"),
        ("requirements_gpu.txt", "deps"), ("constraints.txt", "deps"), ("requirements.in", "deps"),
        ("pyproject.toml", "deps"), ("setup.cfg", "deps"), ("environment.yml", "deps"),
        ("environment-cuda.yaml", "deps"), ("config.toml", "config"), ("notes.txt", None),
        ("requirements/runtime.txt", "deps"), ("src/requirements/optional.in", "deps"), ("docs/runtime.txt", None),
    ],
)
def test_which_files_are_dependency_files(name, kind):
    found = filetypes.by_name(name)
    assert (found.name if found else None) == kind


@pytest.mark.parametrize(
    "specifier,series",
    [
        ("==2.1.0", (2, 1)), ("~=2.1.0", (2, 1)), (">=2.1,<2.2", (2, 1)), ("==2.1.*", (2, 1)),
        ("==2.1.0+cu118", (2, 1)), ("===2.5.1", (2, 5)), (">=2.1.0,<=2.1.2", (2, 1)),
        ("", None), (">=2.0", None), ("<2.2", None), ("~=2.1", None), ("==2.*", None), (">=2.1,<2.3", None),
    ],
)
def test_a_torch_pin_names_one_minor_series_or_none(specifier, series):
    assert pairing.minor_series(specifier) == series


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("pytorch=2.1.0", ("pytorch", "==2.1.0.*")), ("pytorch==2.1.0", ("pytorch", "==2.1.0")),
        ("pytorch 2.1.0 py3.10_cuda11.8_0", ("pytorch", "==2.1.0")), ("conda-forge::pytorch=2.1", ("pytorch", "==2.1.*")),
        ("pytorch", ("pytorch", "")),
    ],
)
def test_conda_match_specs(spec, expected):
    assert pairing.conda_requirement(spec) == expected


def _only_insertions(old: bytes, new: bytes) -> list[bytes]:
    """The inserted byte runs, asserting nothing else changed."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    inserted = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        assert tag in ("equal", "insert"), (tag, old[i1:i2], new[j1:j2])
        if tag == "insert":
            inserted.append(new[j1:j2])
    return inserted


def test_pyproject_insertions_keep_every_other_byte():
    old = (
        b'[project]  # the project\nname = "x"\ndependencies = [\n  # runtime\n  "numpy",\n'
        b"  'torch==2.3.1',   # pinned\n  \"tqdm\"\n]\n[project.optional-dependencies]\n"
        b'npu = [ "torch~=2.3.0" ]\nascend-train = [\n  # the image\n  \'torch==2.3.1\',   # pinned\n  "tqdm"\n]\n'
        b'\n[tool.other]\nkeep = """\ntorch==1.0\n"""\n'
    )
    result = run("pyproject.toml", old)
    assert b"".join(_only_insertions(old, result.new_source)).count(b"torch-npu==2.3.*") == 2
    assert b"  'torch==2.3.1',   # pinned\n  'torch-npu==2.3.*',\n  \"tqdm\"\n]\n\n[tool" in result.new_source
    assert b'npu = [ "torch~=2.3.0", "torch-npu==2.3.*" ]' in result.new_source
    # [project] dependencies, which every machine installs, is not extended; no finding
    # either, since the project's npu extras take torch-npu
    assert [f.line for f in result.findings if f.rule == "NPU850"] == []
    assert run("pyproject.toml", result.new_source).new_source is None
    alone = old.split(b"[project.optional-dependencies]")[0]
    reported = run("pyproject.toml", alone)
    assert reported.new_source is None and [f.line for f in reported.findings if f.rule == "NPU850"] == [6]


def test_bad_dependency_files_are_one_line_errors():
    broken = run("pyproject.toml", '[project\ndependencies = ["torch==2.1.0"]\n')
    assert broken.error == "pyproject.toml:1: not valid TOML: Unexpected character: '\\n'" or \
        broken.error.startswith("pyproject.toml:1: not valid TOML")
    assert run("environment.yml", "dependencies:\n  - pytorch=2.1\n - [\n").error.startswith("environment.yml:")
    assert run("requirements.txt", b"torch==2.1.0\n\xff\n").error is None  # pip's format: any bytes


@pytest.mark.parametrize("version", __import__("npu_migrate.tables.torch_npu_releases", fromlist=["x"]).torch_versions())
def test_every_torch_a_torch_npu_release_requires_gets_its_series(version):
    series = ".".join(version.split(".")[:2])
    result = run("requirements-npu.txt", f"torch=={version}\n")
    assert result.new_source == f"torch=={version}\ntorch-npu=={series}.*\n".encode()
    assert result.findings == []
    # the file every machine installs: reported with the same line, so a CPU machine keeps torch
    base = run("requirements.txt", f"torch=={version}\n")
    assert base.new_source is None
    (finding,) = base.findings
    assert finding.rule == "NPU850" and f"`torch-npu=={series}.*` pairs with this torch" in finding.message
    assert "import torch" in finding.message and "requirements-npu.txt" in finding.suggestion


@pytest.mark.parametrize(
    "pin,nearest",
    [
        ("torch==2.15.0", "`torch==2.14.0` with `torch-npu==2.14.*`"),  # no torch-npu 2.15 (issue 37)
        ("torch==2.3.0", "`torch==2.3.1` with `torch-npu==2.3.*` or `torch==2.2.0` with `torch-npu==2.2.*`"),
        ("torch==2.5.0", "`torch==2.5.1` with `torch-npu==2.5.*` or `torch==2.4.0` with `torch-npu==2.4.*`"),
        ("torch==2.1.2", "`torch==2.1.0` with `torch-npu==2.1.*` or `torch==2.2.0` with `torch-npu==2.2.*`"),
        ("torch>=2.15,<2.16", "`torch==2.14.0` with `torch-npu==2.14.*`"),
    ],
)
def test_a_torch_no_torch_npu_release_pairs_with_is_reported_with_the_nearest_pairs(pin, nearest):
    result = run("requirements.txt", f"{pin}\nnumpy\n")
    assert result.new_source is None
    (finding,) = [f for f in result.findings if f.rule == "NPU850"]
    assert f"nearest: {nearest}" in finding.suggestion
    assert finding.line == 1


def test_a_line_that_is_not_a_requirement_is_left_alone():
    result = run("requirements-npu.txt", "torch==2.1.0\nthis is not a requirement (!)\n")
    assert result.new_source == b"torch==2.1.0\ntorch-npu==2.1.*\nthis is not a requirement (!)\n"


def test_cli_picks_dependency_files_out_of_a_tree(tmp_path, run_cli):
    (tmp_path / "requirements.txt").write_bytes(b"torch==2.4.0\nxformers\n")
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "x"\ndependencies = ["torch==2.4.0"]\n')
    (tmp_path / "requirements-npu.txt").write_bytes(b"-r requirements.txt\ntorch==2.4.0\n")
    result = run_cli("--write", ".")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "requirements-npu.txt").read_bytes() == b"-r requirements.txt\ntorch==2.4.0\ntorch-npu==2.4.*\n"
    # what every machine installs keeps torch importable there: reported, not extended
    assert (tmp_path / "requirements.txt").read_bytes() == b"torch==2.4.0\nxformers\n"
    assert b"torch-npu" not in (tmp_path / "pyproject.toml").read_bytes()
    # the project's Ascend install (requirements-npu.txt) takes torch-npu: nothing to report elsewhere
    assert "requirements.txt:1:1: NPU850" not in result.output and "pyproject.toml:3:" not in result.output
    assert "requirements.txt:2:1: NPU851" in result.output
    (tmp_path / "requirements-npu.txt").unlink()
    reported = run_cli(".")
    assert "requirements.txt:1:1: NPU850" in reported.output and "pyproject.toml:3:" in reported.output


# -- properties ----------------------------------------------------------------

PLAIN = ["numpy>=1.24", "requests", "tqdm==4.66.1", "transformers[torch]>=4.40", "pyyaml ; python_version >= '3.8'",
         "-r base.txt", "# a comment", "", "--index-url https://pypi.org/simple", "Pillow  # images"]
TORCH = ["torch==2.1.0", "torch>=2.0", "torch ~= 2.3.1", "torch==2.5.1+cu121", "torch", "torch>=2.1,<2.2",
         "torch==2.15.0", "torch==2.3.0"]
CUDA = ["flash-attn", "nvidia-nccl-cu12==2.18.1", "--extra-index-url https://download.pytorch.org/whl/cu121",
        "cupy-cuda12x", "torch-npu==2.1.0"]
newline = st.sampled_from(["\n", "\r\n"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PLAIN), max_size=8), newline, st.booleans())
def test_requirements_without_cuda_isms_are_never_touched(lines, nl, final):
    text = nl.join(lines) + (nl if final else "")
    result = run("requirements.txt", text)
    assert result.new_source is None and result.findings == [] and result.error is None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PLAIN + TORCH + CUDA), max_size=8), newline, st.booleans())
def test_a_second_run_changes_nothing_and_reports_the_same(lines, nl, final):
    text = (nl.join(lines) + (nl if final else "")).encode()
    first = run("requirements.txt", text)
    out = first.new_source if first.new_source is not None else text
    if first.new_source is not None:  # whole lines inserted, each a torch-npu requirement
        matcher = difflib.SequenceMatcher(None, text.splitlines(), out.splitlines(), autojunk=False)
        for tag, _, _, j1, j2 in matcher.get_opcodes():
            assert tag in ("equal", "insert") and all(line.startswith(b"torch-npu") for line in out.splitlines()[j1:j2] if tag == "insert")
    second = run("requirements.txt", out)
    assert second.new_source is None
    assert sorted((f.rule, f.message) for f in second.findings) == sorted((f.rule, f.message) for f in first.findings)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([t for t in TORCH if "+" not in t] + ["numpy", "flash-attn", "rich"]), max_size=5),
       st.sampled_from(["\n    ", " "]), st.sampled_from(['"', "'"]))
def test_pyproject_arrays_of_any_layout_converge(items, separator, quote):
    body = ",".join(f"{separator}{quote}{item}{quote}" for item in items)
    text = f'[project]\nname = "x"\ndependencies = [{body}{"," + separator[:1] if items else ""}]\n'.encode()
    first = run("pyproject.toml", text)
    assert first.error is None
    out = first.new_source if first.new_source is not None else text
    _only_insertions(text, out)
    assert run("pyproject.toml", out).new_source is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "text", "rule"), [
    ("setup.py", "from setuptools import setup\nsetup(name='x', install_requires=['vllm==0.9.1', 'flash-attn'])\n",
     "NPU861"),
    ("install.sh", "pip install vllm==0.9.1 flash-attn\n", "NPU808"),
])
def test_vllm_is_not_called_nvidia_only(name, text, rule):
    """vLLM runs on Ascend with vllm-ascend (NPU964): the shared CUDA-only table's advice
    stays, but the message must not say it works only with NVIDIA GPUs (open-instruct)."""
    from tests.rules.golden import migrate_file

    settings = Settings(selection=Selection.create([rule]))
    result = migrate_file(name, text.encode(), settings)
    assert result.error is None, result.error
    messages = [f.message for f in result.findings if f.rule == rule]
    vllm = [m for m in messages if "`vllm`" in m]
    assert vllm and all("vllm-ascend" in m and "NVIDIA" not in m and "CUDA-only" not in m for m in vllm), messages
    assert any("flash-attn" in m and ("NVIDIA" in m or "CUDA-only" in m) for m in messages), messages
