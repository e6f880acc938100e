"""Bad input: a one-line error naming file (and line), file untouched, other files
still processed, exit code 2, never a traceback."""

from __future__ import annotations

import pytest

GOOD = b"import torch\nn = torch.cuda.device_count()\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "good.py").write_bytes(GOOD)
    return tmp_path


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def _assert_clean_failure(result, expected_fragment):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = _errors(result.output)
    assert len(errors) == 1 and expected_fragment in errors[0], result.output


def test_syntax_error(project, run_cli):
    bad = project / "bad.py"
    bad.write_bytes(b"import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    result = run_cli("--write", ".")
    _assert_clean_failure(result, "bad.py:2:")
    assert bad.read_bytes() == b"import torch\ndef f(:\n    torch.cuda.synchronize()\n"
    assert b"torch.npu" in (project / "good.py").read_bytes()  # the others are still processed


def test_undecodable_file(project, run_cli):
    bad = project / "bad.py"
    bad.write_bytes(b"import torch\nx = 'caf\xe9'\ntorch.cuda.synchronize()\n")  # latin-1 bytes, no cookie
    result = run_cli("--write", ".")
    _assert_clean_failure(result, "bad.py:2:")
    assert b"torch.npu" in (project / "good.py").read_bytes()


def test_unreadable_file_reported_even_as_root(project, run_cli, monkeypatch):
    """Root ignores file modes, so simulate the OS refusing the read."""
    import builtins

    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if str(path).endswith("bad.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    (project / "bad.py").write_bytes(GOOD)
    monkeypatch.setattr(builtins, "open", fake_open)
    result = run_cli(".")
    _assert_clean_failure(result, "bad.py: permission denied")


def test_broken_symlink(project, run_cli):
    (project / "link.py").symlink_to(project / "missing.py")
    result = run_cli(".")
    _assert_clean_failure(result, "link.py: broken symbolic link")


def test_missing_path(project, run_cli):
    """A path that does not exist is a usage error found before any file is read (issue
    37.5): not a scanned file that failed, and the other paths are not migrated."""
    result = run_cli("good.py", "nope.py")
    _assert_clean_failure(result, "nope.py: no such file or directory")
    assert "file(s) scanned" not in result.output and "+++" not in result.output


def test_directory_without_supported_files(tmp_path, run_cli):
    (tmp_path / "notes.txt").write_text("cuda")
    result = run_cli(".")
    assert result.exit_code == 0
    assert "warning: no supported files found" in result.output


def test_unknown_rule_code_is_a_usage_error(project, run_cli):
    result = run_cli("--select", "NPX9", ".")
    assert result.exit_code == 2
    assert "unknown rule code" in result.output


# --------------------------------------------------------------------------- special files


def _subprocess_cli(*args, cwd):
    """A real process: a FIFO that blocked would hang it, and the timeout fails the test."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "npu-migrate"
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("named", [False, True], ids=["found-in-a-walk", "named-explicitly"])
def test_a_fifo_is_skipped_with_a_warning(project, named):
    import os

    os.mkfifo(project / "x.py")
    result = _subprocess_cli("--write", *(["x.py", "good.py"] if named else ["."]), cwd=project)
    assert result.returncode == 0, result.stderr
    assert "warning: x.py: a FIFO, not a regular file; skipped" in result.stderr.splitlines()
    assert b"torch.npu" in (project / "good.py").read_bytes()  # the others are still processed


def test_a_character_device_named_explicitly_is_skipped(project, run_cli):
    result = run_cli("/dev/null", "good.py")
    assert result.exit_code == 0
    assert "warning: /dev/null: a character device, not a regular file; skipped" in result.output
    assert "+n = torch.npu.device_count()" in result.output


def test_symlinks_outside_the_given_paths_are_reported_not_followed(tmp_path, run_cli):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "lib.py").write_bytes(GOOD)
    project = tmp_path / "project"
    project.mkdir()
    (project / "good.py").write_bytes(GOOD)
    (project / "lib.py").symlink_to(outside / "lib.py")
    (project / "vendored").symlink_to(outside)
    result = run_cli("--write", "project")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: project/vendored: symbolic link to directory {outside}, outside the given paths; not followed",
        f"warning: project/lib.py: symbolic link to file {outside / 'lib.py'}, outside the given paths; not followed",
    ]
    assert (outside / "lib.py").read_bytes() == GOOD  # not written through the link
    assert b"torch.npu" in (project / "good.py").read_bytes()


def test_a_file_with_two_names_in_the_tree_is_migrated_once(project, run_cli):
    (project / "alias.py").symlink_to("good.py")
    result = run_cli("--write", ".")
    assert result.exit_code == 0, result.output  # a second write would find the file changed
    assert "1 file(s) scanned, 1 changed" in result.output
    assert (project / "alias.py").is_symlink() and b"torch.npu" in (project / "good.py").read_bytes()


def test_a_hard_linked_file_is_processed_once_and_not_split(project, run_cli):
    (project / "sub").mkdir()
    (project / "sub" / "hard.py").hardlink_to(project / "good.py")
    result = run_cli("--write", ".")
    _assert_clean_failure(result, "has 2 hard links; not written (skipped)")
    assert "1 file(s) scanned" in result.output
    assert (project / "sub" / "hard.py").samefile(project / "good.py")
    assert (project / "good.py").read_bytes() == GOOD


# --------------------------------------------------------------------------- what CPython rejects


def _nested(depth: int) -> bytes:
    return b"import torch\nx = " + b"(" * depth + b"torch.zeros(1).cuda()" + b")" * depth + b"\n"


@pytest.mark.parametrize("depth", [201, 2000], ids=["just-over-cpython", "crashed-libcst"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nesting_cpython_rejects_is_rejected_with_its_message(project, run_cli, depth, jobs):
    bad = project / "deep.py"
    bad.write_bytes(_nested(depth))
    result = run_cli("--write", "-j", jobs, ".")
    _assert_clean_failure(result, "deep.py:2:205: syntax error: too many nested parentheses")
    assert bad.read_bytes() == _nested(depth)
    assert b"torch.npu" in (project / "good.py").read_bytes()


def test_nesting_cpython_accepts_is_migrated(project, run_cli):
    (project / "deep.py").write_bytes(_nested(199))
    result = run_cli("--write", ".")
    assert result.exit_code == 0, result.output
    assert (project / "deep.py").read_bytes() == _nested(199).replace(b".cuda()", b".npu()").replace(
        b"import torch\n", b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\n"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"import torch\nx = torch.zeros(1).cuda()" + b" + a" * 5000 + b"\n",
         "t.py:1: too deeply nested: Python cannot parse it either (maximum recursion depth exceeded during ast construction)"),
        (b"import torch\nx = torch.zeros(1).cuda()" + b".a" * 5000 + b"\n",
         "t.py:1: too deeply nested: Python cannot parse it either (maximum recursion depth exceeded during ast construction)"),
        (b"import torch\nx = 1\ny = torch.zeros(1).cuda()\0\n", "t.py:3:26: syntax error: source code string cannot contain null bytes"),
        (b"import torch\n" + b"".join(b" " * i + b"if x:\n" for i in range(101)) + b" " * 101 + b"torch.cuda.init()\n",
         "t.py:102:"),
    ],
    ids=["5000-term-chain", "5000-attribute-chain", "null-byte", "101-indent-levels"],
)
def test_what_cpython_rejects_never_reaches_libcst(monkeypatch, source, message):
    """Failing fast: libcst would take seconds on a 5,000-term chain before giving up."""
    from npu_migrate.python import engine

    def parse_module(*args, **kwargs):
        raise AssertionError("libcst was asked to parse a file CPython rejects")

    monkeypatch.setattr(engine.cst, "parse_module", parse_module)
    result = engine.migrate_source("t.py", source)
    assert result.error is not None and result.error.startswith(message), result.error
    assert result.new_source is None


# --------------------------------------------------------------------------- the cache


@pytest.mark.parametrize(
    "entry",
    ['[]', '"text"', 'null', '1', '{}', '{"new_source": 5, "fixes": [], "findings": []}',
     '{"new_source": null, "fixes": {"line": 1}, "findings": []}',
     ('{"new_source": null, "fixes": [{"line": "1", "col": 0, "rule": "NPU101", "message": "m", "end_line": null, '
      '"end_col": null, "cell": null}], "findings": []}'),
     ('{"new_source": null, "fixes": [], "findings": [{"line": 1, "col": 0, "rule": 7, "message": "m", '
      '"suggestion": "s", "end_line": null, "end_col": null, "cell": null}]}'),
     ('{"new_source": null, "fixes": [{"line": 1, "col": 0, "rule": "NPU101", "message": "m", "end_line": "2", '
      '"end_col": null, "cell": null}], "findings": []}'),
     '{"new_source": "\\u20ac", "fixes": [], "findings": []}'],
)
def test_a_cache_entry_of_the_wrong_shape_is_recomputed(project, run_cli, entry, tmp_path_factory):
    """Even an entry that verifies (this user's key: an older npu-migrate's shape) is
    recomputed when its content is not what the cache writes."""
    import json
    import zlib

    from npu_migrate.pipeline import cache

    reports = tmp_path_factory.mktemp("reports")  # outside the tree: JSON files are migrated too
    first = run_cli(".", "--report", reports / "1.json")
    [cached] = cache.default_directory(project).rglob("*.bin")
    store = cache.Cache(cache.default_directory(project), "")
    store._key = cache.secret_key(store.home)
    payload = zlib.compress(entry.encode())
    cached.write_bytes(cache._MAGIC + store._mac(cached.stem, payload) + payload)
    second = run_cli(".", "--report", reports / "2.json")
    assert second.exit_code == 0 and "Traceback" not in second.output
    assert second.output == first.output  # a verified entry: no warning
    assert json.loads((reports / "2.json").read_text()) == json.loads((reports / "1.json").read_text())
    data = cached.read_bytes()
    assert json.loads(zlib.decompress(data[len(cache._MAGIC) + 32:]))["new_source"]  # rewritten with the real result
