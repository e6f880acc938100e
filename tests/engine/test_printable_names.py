"""File names and messages with control characters in every human format (adversarial
round 5, issue 38): a file named ``"a\\n::error file=x::y.py"`` printed raw by the text
format starts a GitHub Actions workflow command on a line of its own in a CI log, and
``ESC ] 0 ; ... BEL`` in a name retitles the terminal. Names are escaped (``\\x0a``,
``\\x1b``) in text, grouped and markdown, and in github's data (after the line ends it
%-encodes); JSON and SARIF keep them escaped by their own encodings."""

from __future__ import annotations

import json

import pytest

SOURCE = b"import torch\nn = torch.cuda.device_count()\nfrom apex import amp\n"
NAMES = ["a\n::error file=x::INJECTED.py", "b\x1b]0;pwn\x07\x1b[2J.py", "c\r::notice::x.py", "d\u202etxt.py",
         "e\x9b31m.py"]
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


@pytest.fixture
def project(tmp_path):
    for name in NAMES:
        (tmp_path / name).write_bytes(SOURCE)
    (tmp_path / "f\x1b[2J.py").write_bytes(b"def (:\n")  # an error line naming it
    return tmp_path


def _lines_outside_the_diff(output: str) -> list[str]:
    return [line for line in output.splitlines() if not line.startswith((" ", "+", "-", "@@"))]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["text", "grouped", "markdown", "github"])
@pytest.mark.parametrize("mode", [[], ["--check"], ["--write"]])
def test_names_with_controls_are_escaped(project, run_cli, fmt, mode):
    result = run_cli(".", "--no-cache", "--output-format", fmt, *mode)
    assert result.exit_code == 2  # the file that does not parse
    lines = _lines_outside_the_diff(result.output)
    assert not [line for line in lines if line.startswith("::") and "INJECTED" in line and fmt != "github"], lines
    if fmt == "github":
        assert not [line for line in lines if line.startswith("::error file=x")], lines
    for line in lines:
        assert not any(c in line for c in RAW), repr(line)
    joined = "\n".join(lines)
    assert "a\\x0a::error file=x::INJECTED.py" in joined or "a%0A%3A%3Aerror file=x%3A%3AINJECTED.py" in joined
    assert "b\\x1b]0;pwn\\x07\\x1b[2J.py" in joined
    assert "f\\x1b[2J.py" in joined  # in the error line (github: an annotation)


@pytest.mark.timeout(120)
def test_json_keeps_the_names(project, run_cli):
    run_cli(".", "--no-cache", "--output-format", "json", "-o", "r.json")
    text = (project / "r.json").read_text()
    assert not any(c in text for c in RAW)  # JSON escapes them itself
    assert set(NAMES) <= {r["path"] for r in json.loads(text)["files"]}
