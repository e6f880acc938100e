"""A migrated repository declares the npu-runtime its code imports (NPU854, NPU862).

Each ``fixtures/declared/<case>/before`` is a small repository: a CUDA training script
(which NPU701 gives ``import npu_runtime``) next to one way of declaring dependencies;
``after`` is what ``npu-migrate . --write`` must leave. The negative cases stay
byte-identical where nothing imports npu_runtime, or where npu-runtime is declared
already. A second run changes nothing and reports the same findings.
"""

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main
from npu_migrate.pipeline import runtime_bundle

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "declared"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".npu-migrate-cache" not in p.parts}


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    """Files are migrated in this process (the runner's fallback where no pool can be
    made): a worker pool per run would cost seconds on a loaded machine."""
    from npu_migrate.pipeline import runner

    def no_pool(*args, **kwargs):
        raise runner._NoProcessPool

    monkeypatch.setattr(runner, "_until_broken", no_pool)


def _run(repo: Path, *flags: str) -> tuple[int, dict]:
    report = repo.parent / "report.json"
    result = CliRunner().invoke(main, [str(repo), "--no-cache", "--no-diff", "--quiet", "--jobs", "1",
                                       "--report", str(report), *flags])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(report.read_text())


def _findings(report: dict) -> list[tuple[str, str, int]]:
    return sorted((Path(f["path"]).name, item["rule"], item["start"]["line"]) for f in report["files"]
                  for item in f.get("findings", []))


def test_the_pin_is_the_bundled_runtime_version():
    pyproject = (FIXTURES.parents[1] / "runtime" / "npu_runtime" / "__init__.py").read_text()
    assert f'__version__ = "{runtime_bundle.version()}"' in pyproject
    assert runtime_bundle.requirement() == f"npu-runtime=={runtime_bundle.version()}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES)
def test_declared_fixture(case, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / case / "before", repo)
    _, first = _run(repo, "--write")
    assert _files(repo) == _files(FIXTURES / case / "after")
    second_code, second = _run(repo, "--check")
    assert second_code == 0, "a second run would change files"
    assert _findings(second) == _findings(first)


EXPECTED_FINDINGS = {
    # nothing declares dependencies: the entry point says what to install
    "nothing_declared": [("train.py", "NPU854", 1)],
    # conda has no npu-runtime and the environment has no pip list to hold it
    "conda_no_pip": [("environment.yml", "NPU854", 3), ("train.py", "NPU854", 1)],
    # pip-compile's output is not edited: its input gets the line
    "pip_compile": [("requirements.txt", "NPU854", 6)],
    # a Dockerfile that installs torch inline declares it (NPU812): nothing to report
    "dockerfile_inline_pip": [],
    # the script that imports the training module declares it through requirements.txt
    "imported_module": [],
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(EXPECTED_FINDINGS))
def test_runtime_findings(case, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / case / "before", repo)
    _, report = _run(repo)
    assert [f for f in _findings(report) if f[1] == "NPU854"] == EXPECTED_FINDINGS[case]


@pytest.mark.timeout(120)
def test_summary_says_where_it_is_declared_or_what_to_install(tmp_path):
    version = runtime_bundle.version()
    for case, expected in (("requirements_txt", rf"npu-runtime=={version} to add to \S*requirements\.txt\n"),
                           ("nothing_declared", rf"no dependency file declares it: install npu-runtime=={version} "),
                           ("dockerfile_inline_pip", rf"npu-runtime=={version} to add to \S*Dockerfile\n")):
        repo = tmp_path / case
        shutil.copytree(FIXTURES / case / "before", repo)
        result = CliRunner().invoke(main, [str(repo), "--no-cache", "--no-diff", "--jobs", "1"])
        assert re.search(expected, result.output), result.output


@pytest.mark.timeout(120)
def test_a_conda_install_into_another_environment_is_reported_not_rewritten(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "dockerfile_conda_env" / "before", repo)
    _, report = _run(repo)
    # the Dockerfile says what to add, and (nothing declares it yet) so does the entry point
    assert [f for f in _findings(report) if f[1] in ("NPU812", "NPU854")] == [("Dockerfile", "NPU812", 3),
                                                                               ("train.py", "NPU854", 1)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("python,declared", [("3.8", False), ("3.10", True)])
def test_a_project_that_installs_an_older_python_does_not_get_it_declared(tmp_path, python, declared):
    """VideoMAEv2 (held-out round 19): docs/INSTALL.md makes a python=3.8 environment and
    installs requirements.txt into it; npu-runtime needs 3.10, so declaring it there would
    break that install. The entry point is still told what to install."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "requirements_no_torch" / "before", repo)
    (repo / "docs").mkdir()
    (repo / "docs" / "INSTALL.md").write_text(
        f"```\nconda create --name env python={python} -y\npip install -r requirements.txt\n```\n")
    before = (repo / "requirements.txt").read_bytes()
    _, report = _run(repo, "--write")
    assert ((repo / "requirements.txt").read_bytes() != before) is declared
    assert bool([f for f in _findings(report) if f[1] == "NPU854"]) is not declared


@pytest.mark.timeout(120)
def test_vendored_runtime_is_not_declared(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "requirements_no_torch" / "before", repo)
    before = (repo / "requirements.txt").read_bytes()
    _, report = _run(repo, "--write", "--vendor-runtime", str(repo))
    assert (repo / "requirements.txt").read_bytes() == before
    assert not [f for f in _findings(report) if f[1] == "NPU854"]


@pytest.mark.timeout(120)
def test_a_migrated_library_package_imports_without_torch_npu_and_npu_runtime(tmp_path):
    """fixtures/declared/library_package: the package's modules (one with a __main__
    demo that trains) import where neither torch_npu nor npu_runtime can be imported."""
    import subprocess
    import sys

    probe = ("import sys; sys.modules['torch_npu'] = None; sys.modules['npu_runtime'] = None\n"
             "import pkg.mod, pkg.helpers, pkg.config_data\n"
             "print(pkg.config_data.dist_params['backend'], callable(pkg.helpers.to_device))")
    after = FIXTURES / "library_package" / "after"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=after, capture_output=True, text=True, timeout=100,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["hccl", "True"]
    # ...and the demo block, run as a script, installs the runtime, or says in one line that
    # it runs without it and goes on (issue 35.4: an entry point never stops for lack of it)
    assert (GUARDED_IN_BLOCK + "    m = torch.nn.Linear(2, 2).npu()\n") in (after / "pkg" / "mod.py").read_text()
    run = ("import sys, runpy; sys.modules['npu_runtime'] = None\n"
           "try:\n    runpy.run_module('pkg.mod', run_name='__main__')\n"
           "except Exception as error:\n    print('stopped by', type(error).__name__, error)\n")
    proc = subprocess.run([sys.executable, "-c", run], cwd=after, capture_output=True, text=True, timeout=100,
                          check=False)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("npu-runtime is not installed: "), proc.stdout + proc.stderr
    assert "npu_runtime" not in "".join(lines[1:])  # whatever stops the CPU run later, it is not the runtime
    assert not (after / "pkg" / "config_data.py").read_text().count("import")


@pytest.mark.timeout(120)
def test_entry_flag_names_an_entry_point_like_the_configuration(tmp_path):
    expected = (FIXTURES / "named_entry" / "after" / "main.py").read_text()
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "named_entry" / "before", repo)
    (repo / "pyproject.toml").unlink()
    _run(repo, "--write")
    # main.py trains through engine.py, which the run sees: the import graph finds it
    assert (repo / "main.py").read_text() == expected
    shutil.rmtree(repo)
    shutil.copytree(FIXTURES / "named_entry" / "before", repo)
    (repo / "pyproject.toml").unlink()
    (repo / "engine.py").unlink()  # the trainer is outside the run (an installed package)
    _run(repo, "--write")
    assert "npu_runtime" not in (repo / "main.py").read_text()  # trains elsewhere: not found by itself
    shutil.rmtree(repo)
    shutil.copytree(FIXTURES / "named_entry" / "before", repo)
    (repo / "pyproject.toml").unlink()
    (repo / "engine.py").unlink()
    _run(repo, "--write", "--entry", str(repo / "main.py"))
    assert (repo / "main.py").read_text() == expected


@pytest.mark.timeout(120)
def test_launch_advice_is_a_command_that_works_or_the_lines_to_add(tmp_path, monkeypatch):
    """`npu-migrate launch -t ranktable` advises running NPU701 only where that adds
    npu_runtime.install(): following the advice silences the warning."""
    import shlex

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "named_entry" / "before", repo)
    (repo / "pyproject.toml").unlink()
    monkeypatch.chdir(repo)
    warned = CliRunner().invoke(main, ["launch", "main.py", "-t", "ranktable"])
    advice = re.search(r"\((npu-migrate .*) adds it, rule NPU701\)", warned.output)
    assert advice, warned.output
    CliRunner().invoke(main, shlex.split(advice.group(1))[1:] + ["--no-cache", "--jobs", "1", "--quiet"])
    assert "warning" not in CliRunner().invoke(main, ["launch", "main.py", "-t", "ranktable"]).output
    # already NPU code with nothing left to migrate: named as the entry, NPU701 still adds
    # the call (the user said it is the entry point), so the command works there too
    (repo / "done.py").write_text("import torch\nimport torch_npu\n\nif __name__ == '__main__':\n"
                                  "    torch.npu.set_device(0)\n")
    told = CliRunner().invoke(main, ["launch", "done.py", "-t", "ranktable"]).output
    advice = re.search(r"\((npu-migrate .*) adds it, rule NPU701\)", told)
    assert advice, told
    CliRunner().invoke(main, shlex.split(advice.group(1))[1:] + ["--no-cache", "--jobs", "1", "--quiet"])
    assert "warning" not in CliRunner().invoke(main, ["launch", "done.py", "-t", "ranktable"]).output
    # a file NPU701 cannot place the call in (no imports, no __main__ block): the lines to add
    (repo / "bare.py").write_text("print('train')\n")
    told = CliRunner().invoke(main, ["launch", "bare.py", "-t", "ranktable"]).output
    (warning,) = [line for line in told.splitlines() if line.startswith("warning: bare.py")]
    assert "rule NPU701" not in warning and "add `import npu_runtime` and `npu_runtime.install()`" in warning


@pytest.mark.timeout(120)
def test_a_root_module_that_the_entry_script_imports_is_library_code(tmp_path):
    """fixtures/declared/imported_module: ``main.py`` imports ``engine.py`` beside it
    (``from engine import train_one_epoch``, ConvNeXt's shape). engine.py trains but is
    library code: it imports where torch_npu and npu_runtime cannot be imported; the
    runtime goes into main.py, the script that runs."""
    after = FIXTURES / "imported_module" / "after"
    _imports_without_npu_packages(after, "import engine; print(callable(engine.train_one_epoch))")
    assert "npu_runtime" not in (after / "engine.py").read_text()
    main_py = (after / "main.py").read_text()
    assert main_py.startswith("import argparse\n\nimport torch\n")
    assert "try:\n    import npu_runtime\nexcept ImportError:" in main_py  # starts where npu-runtime is missing
    assert 'if __name__ == "__main__":\n    if npu_runtime is not None:\n        npu_runtime.install()\n' in main_py


@pytest.mark.timeout(120)
def test_an_imported_script_that_trains_through_a_module_installs_the_runtime_in_its_main_block():
    """fixtures/declared/imported_script_trains_in_module: DETR's and DeiT's shape.
    ``main.py`` trains through ``engine.py`` and is itself imported
    (``run_with_submitit.py``: ``import main as trainer``). It is the script users run
    (``python main.py``), so it gets the runtime, inside its ``__main__`` block (library
    code with a demo block): importing it still needs neither torch_npu nor npu_runtime,
    and requirements.txt declares npu-runtime. Held-out round, issue 21: DETR's
    migrated main.py had no npu_runtime at all."""
    after = FIXTURES / "imported_script_trains_in_module" / "after"
    main_py = (after / "main.py").read_text()
    assert main_py.startswith("import argparse\n\nimport torch\n\nfrom engine import train_one_epoch\n\ntry:\n"
                              "    import torch_npu  # noqa: F401\n")
    assert main_py.endswith('if __name__ == "__main__":\n' + GUARDED_IN_BLOCK
                            + "    main(get_args_parser().parse_args())\n")
    assert "npu-runtime==" in (after / "requirements.txt").read_text()
    _imports_without_npu_packages(after, "import run_with_submitit, main; print(callable(main.main))")


#: NPU701's install() in a ``__main__`` block of library code (imports.runtime_install_in_block)
GUARDED_IN_BLOCK = (
    "    try:\n"
    "        import npu_runtime\n"
    "    except ImportError:  # the job still trains, without the runtime's install()\n"
    '        print("npu-runtime is not installed: no launcher translation, HCCL defaults"\n'
    '              " or hang watchdog (pip install npu-runtime==0.1.0)")\n'
    "    else:\n"
    "        npu_runtime.install()\n"
)


def _imports_without_npu_packages(directory, probe: str) -> None:
    """Run ``probe`` (which prints ``True``) in ``directory`` where importing torch_npu or
    npu_runtime fails, as on a machine without them."""
    import subprocess
    import sys

    blocked = "import sys; sys.modules['torch_npu'] = None; sys.modules['npu_runtime'] = None\n"
    proc = subprocess.run([sys.executable, "-c", blocked + probe], cwd=directory, capture_output=True, text=True,
                          timeout=100, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True"]


def test_the_import_graph_names_the_imported_files_and_the_scripts_that_train_through_them():
    from npu_migrate.pipeline.facts import ProjectFacts

    facts = ProjectFacts.scan([
        ("/r/main.py", b"from engine import train_one_epoch\nimport utils as u\nfrom models.convnext import (\n    A,\n)\n"),
        ("/r/engine.py", b"def train_one_epoch(m):\n    m().backward()\n"),
        ("/r/utils.py", b"x = 1\n"),
        ("/r/models/convnext.py", b"import torch\n"),
        ("/r/tools/export.py", b"import utils\nfrom . import nothing\n"),
        ("/r/alone.py", b"import os\nimport json\n"),
    ])
    assert sorted(facts.imported_files) == ["/r/engine.py", "/r/models/convnext.py", "/r/utils.py"]
    assert sorted(facts.imports_training) == ["/r/main.py"]


def test_the_python_a_project_installs_is_a_pin_not_a_range():
    """`requires-python = ">=3.8"` admits 3.10 (llama-cookbook declares npu-runtime); a conda
    `python=3.8`, a doc's `conda create ... python=3.8`, `python_requires="==3.8"` do not."""
    from npu_migrate.pipeline.facts import ProjectFacts

    def floor(name: str, text: bytes) -> str:
        return ProjectFacts.scan([(f"/p/{name}", text)]).python_floor

    assert floor("pyproject.toml", b'requires-python = ">=3.8"\n') == ""
    assert floor("setup.py", b'setup(python_requires=">=3.7")\n') == ""
    assert floor("setup.py", b'setup(python_requires="==3.8")\n') == "3.8"
    assert floor("environment.yml", b"dependencies:\n  - python=3.9\n  - pip\n") == "3.9"
    assert floor("INSTALL.md", b"conda create -n env python=3.8 -y\npip install -r requirements.txt\n") == "3.8"
    assert floor("chatbot.md", b"conda create -n bot python=3.8\npip install langchain flask\n") == ""  # not the project
    assert floor("Dockerfile", b"FROM python:3.11-slim\n") == "3.11"
