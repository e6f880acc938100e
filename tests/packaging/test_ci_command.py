"""CI runs exactly the README's commands (issue 37.6): the second opening command (torch's
CPU build, then the editable installs with the test dependencies) and the whole-suite
command of the README's test block, so what a new user types from a fresh clone is what
CI proves. The README's top shows the demo before the tests, and no step after the
second command installs anything (a later `pip install` would replace the editable
installs)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
TOP = README[:README.index("\n---\n")]  # everything before "Migrate your repository"


def _blocks() -> list[list[str]]:
    """The top's bash blocks, each as its command lines (comments dropped)."""
    return [[re.sub(r"\s+#.*$", "", line) for line in block.splitlines() if line and not line.startswith("#")]
            for block in re.findall(r"```bash\n(.*?)```", TOP, re.DOTALL)]


def _test_commands() -> list[str]:
    (block,) = [b for b in _blocks() if any(line.startswith("python -m pytest") for line in b)]
    return block


def test_the_readme_opens_with_install_and_test_install_commands():
    first, second = _blocks()[0]
    assert first.startswith("pip install . && npu-migrate ")  # the tool alone: no runtime, no torch
    # torch's CPU build explicitly, then the editable installs
    assert second.startswith("pip install --no-deps --extra-index-url https://download.pytorch.org/whl/cpu "
                             "torch==2.13.0 && ")
    assert second.endswith("pip install -e ./runtime -e '.[test]'")


def test_the_fast_subset_is_beside_the_whole_suite():
    fast, full = _test_commands()
    assert fast == 'python -m pytest -m "not slow" -n 2'
    assert full == "python -m pytest -n 2"


def test_the_demo_comes_before_the_tests_and_nothing_after_step_2_installs():
    blocks = _blocks()
    demo = next(i for i, b in enumerate(blocks) if any("npu-migrate emulate" in line for line in b))
    tests = next(i for i, b in enumerate(blocks) if any(line.startswith("python -m pytest") for line in b))
    assert 0 < demo < tests
    later = [line for block in blocks[1:] for line in block]
    assert not [line for line in later if re.search(r"\bpip install\b", line)], later


def test_ci_runs_the_readme_commands_verbatim():
    _, install = _blocks()[0]
    _, full = _test_commands()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert f"{install} && {full}" in ci, f"{install} && {full!r} is not a line of .ci/run"


def test_the_test_extra_holds_the_emulate_extra_and_xdist():
    """The demo runs on what the second command installed: [test] must hold [emulate]."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras["emulate"]) <= set(extras["test"])
    assert any(r.startswith("pytest-xdist") for r in extras["test"])
