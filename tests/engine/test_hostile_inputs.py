"""Issue 29 (1): every front end rejects pathological input fast: deep input gets
one line naming the file (exit 2 from the CLI, the other files still processed),
wide input of ordinary depth is migrated, and no RecursionError escapes even
under a low recursion limit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.limits import DEPTHS, MAX_DEPTH

#: The payload that makes every front end's rules parse the file (their prefilters).
WORD = "CUDA_VISIBLE_DEVICES=0 torch.cuda nccl cuda"
NOTEBOOK_HEAD = {"cells": [{"cell_type": "code", "metadata": {}, "source": "import torch\ntorch.cuda.synchronize()\n",
                            "outputs": [], "execution_count": None}],
                 "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _notebook(extra: str) -> str:
    return json.dumps(NOTEBOOK_HEAD)[:-1] + f', "x": {extra}}}'


#: name -> (file name, deep(n) -> text, wide(n) -> text). ``deep`` nests n levels.
FRONT_ENDS = {
    "json-array": ("c.json", lambda n: "[" * n + f'"{WORD}"' + "]" * n,
                   lambda n: json.dumps([WORD] * n)),
    "json-object": ("c.json", lambda n: '{"a": ' * n + f'"{WORD}"' + "}" * n,
                    lambda n: json.dumps({f"k{i}": WORD for i in range(n)})),
    "yaml-flow": ("c.yaml", lambda n: "a: " + "[" * n + WORD + "]" * n + "\n",
                  lambda n: "".join(f"k{i}: {WORD}\n" for i in range(n))),
    "yaml-mapping": ("c.yaml", lambda n: "{a: " * n + WORD + "}" * n + "\n",
                     lambda n: "a: [" + ", ".join([WORD] * n) + "]\n"),
    "toml-array": ("c.toml", lambda n: "[tool.x]\ny = " + "[" * n + f'"{WORD}"' + "]" * n + "\n",
                   lambda n: "".join(f'k{i} = "{WORD}"\n' for i in range(n))),
    "toml-inline": ("c.toml", lambda n: "y = " + "{a = " * n + f'"{WORD}"' + "}" * n + "\n",
                    lambda n: "y = [" + ", ".join([f'"{WORD}"'] * n) + "]\n"),
    "pyproject": ("pyproject.toml", lambda n: "[project]\ndependencies = " + "[" * n + '"torch"' + "]" * n + "\n",
                  lambda n: "[project]\ndependencies = [" + ", ".join(f'"p{i}"' for i in range(n)) + ', "torch"]\n'),
    "conda": ("environment.yml", lambda n: "dependencies:\n  - " + "[" * n + "pytorch-cuda" + "]" * n + "\n",
              lambda n: "dependencies:\n" + "".join(f"  - p{i}\n" for i in range(n)) + "  - pytorch-cuda=11.8\n"),
    "notebook": ("n.ipynb", lambda n: _notebook("[" * n + "]" * n),
                 lambda n: json.dumps({**NOTEBOOK_HEAD, "cells": NOTEBOOK_HEAD["cells"] * n})),
    "shell-substitution": ("s.sh", lambda n: "echo " + "$(" * n + WORD + ")" * n + "\n",
                           lambda n: f"export {WORD}\n" * n),
    "shell-subshell": ("s.sh", lambda n: "(" * n + WORD + ")" * n + "\n",
                       lambda n: f"( {WORD} )\n" * n),
    "shell-if": ("s.sh", lambda n: "if true; then " * n + f"export {WORD}; " + "fi; " * n + "\n",
                 lambda n: f"if true; then export {WORD}; fi\n" * n),
    "dockerfile": ("Dockerfile", lambda n: "FROM x\nRUN echo " + "$(" * n + WORD + ")" * n + "\n",
                   lambda n: "FROM x\n" + f"RUN export {WORD}\n" * n),
}


def _migrate(name: str, text: str):
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.pipeline.settings import Settings

    filename = FRONT_ENDS[name][0]
    start = time.perf_counter()
    result = migrate_safely(filename, text.encode(), Settings())
    return result, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(MAX_DEPTH + 1, 60_000))
def test_deep_input_is_refused_fast_with_one_line(name, depth):
    text = FRONT_ENDS[name][1](depth)
    result, took = _migrate(name, text)
    filename = FRONT_ENDS[name][0]
    assert result.error is not None and result.error.startswith(f"{filename}:"), result.error
    assert "\n" not in result.error and "nested more than" in result.error
    assert result.new_source is None
    assert took < 2.0, f"{took:.2f}s for {len(text)} bytes"


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.generate])
@given(width=st.integers(1, 1500))
def test_wide_input_is_migrated(name, width):
    if name == "notebook":
        width //= 4  # one code cell per unit: 1,000 cells take 10 s here (see docs/hardening-cli.md)
    result, took = _migrate(name, FRONT_ENDS[name][2](width))
    assert result.error is None, result.error
    assert took < 10, f"{took:.1f}s for width {width}"


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
def test_nesting_at_the_limit_is_accepted(name):
    if name == "notebook":  # nbformat's schema has no room for a deep "x"; nesting inside outputs instead
        text = json.dumps({**NOTEBOOK_HEAD, "metadata": {"x": json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))}})
    else:
        text = FRONT_ENDS[name][1]((DEPTHS["toml"] if "toml" in name or name == "pyproject" else MAX_DEPTH) - 3)
    result, _ = _migrate(name, text)
    assert result.error is None or "nested more than" not in result.error, result.error


def test_a_one_megabyte_deep_file_is_refused_within_two_seconds():
    for name in sorted(FRONT_ENDS):
        deep = FRONT_ENDS[name][1]
        text = deep((1 << 20) * 1000 // len(deep(1000)))  # about 1 MB, the trigger word in the middle
        result, took = _migrate(name, text)
        assert result.error is not None and took < 2.0, (name, took, result.error)


@pytest.mark.timeout(120)
def test_cli_one_line_per_bad_file_exit_2_others_written(tmp_path):
    good = tmp_path / "good.py"
    good.write_bytes(b"import torch\nn = torch.cuda.device_count()\n")
    names = []
    for index, name in enumerate(sorted(FRONT_ENDS)):
        filename, deep, _ = FRONT_ENDS[name]
        if filename == "pyproject.toml":
            continue  # the project's own config: a usage error, tested below
        directory = tmp_path / f"d{index}"
        directory.mkdir()
        (directory / filename).write_text(deep(50_000))
        names.append(f"d{index}/{filename}")
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "--write", "--no-cache", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=110, check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert sorted(e.split(":")[1].strip() for e in errors) == sorted(names), errors
    assert b"torch.npu" in good.read_bytes()


def test_a_deep_project_config_is_one_usage_error(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text("[tool.x]\ny = " + "[" * 50_000 + "]" * 50_000 + "\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    result = run_cli(".")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "pyproject.toml:2: cannot read config: nested more than" in result.output


LOW_RECURSION = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from tests.engine.test_hostile_inputs import FRONT_ENDS
    from npu_migrate.pipeline.runner import migrate_safely, _warm
    from npu_migrate.pipeline.settings import Settings
    from npu_migrate.pipeline import filetypes
    _warm(tuple(t.name for t in filetypes.FILE_TYPES))
    import yaml, tomlkit, nbformat, libcst  # imported before the limit is lowered
    depth = len(__import__("inspect").stack())
    sys.setrecursionlimit(depth + 60)  # far below what the parsers need for nesting < MAX_DEPTH
    out = []
    for name, (filename, deep, wide) in sorted(FRONT_ENDS.items()):
        for level in (20, 60, 150, 199, 5000):
            result = migrate_safely(filename, deep(level).encode(), Settings())
            out.append([name, level, result.error])
    py = migrate_safely("p.py", ("x = " + "(" * 150 + "1" + ")" * 150 + "\\n").encode(), Settings())
    out.append(["python", 150, py.error])
    sys.setrecursionlimit(10000)
    print(json.dumps(out))
""")


@pytest.mark.timeout(300)
def test_no_recursion_error_escapes_under_a_low_recursion_limit(tmp_path):
    from pathlib import Path

    script = LOW_RECURSION.format(tests=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=280, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout.splitlines()[-1])
    assert len(rows) == len(FRONT_ENDS) * 5 + 1
    for name, level, error in rows:
        if error is not None:  # refused: one line, naming the file, never an internal error
            assert "\n" not in error and "internal error" not in error, (name, level, error)
