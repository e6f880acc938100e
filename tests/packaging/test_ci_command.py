"""CI runs exactly the README's test command (the second opening command), so what a new
user types from a fresh clone is what CI proves."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _opening_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, re.DOTALL).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_the_readme_opens_with_install_and_test_commands():
    first, second = _opening_commands()
    assert first.startswith("pip install . && npu-migrate ")  # the tool alone: no runtime, no torch
    assert second.startswith("pip install -e ./runtime -e '.[test]'") and second.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    _, test_command = _opening_commands()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci, f"{test_command!r} is not a line of .ci/run"
