"""Bounds found by adversarial round 6 (issue 38): NPU850 on a dependency file of torch
pins (each a bounded run; within the 2,000-entry bound the old code compared every torch
pin with every other one: 9 s for 2,000 pins, 15 s with markers)."""

from __future__ import annotations

import time

import pytest

from npu_migrate.deps import engine as deps_engine
from npu_migrate.pipeline.settings import Settings


def _pins(n: int) -> bytes:
    return b"".join(b'torch==2.1.0 ; python_version > "3.%d"\n' % i for i in range(n))


@pytest.mark.timeout(120)
def test_npu850_reads_each_entrys_markers_once(monkeypatch):
    import importlib

    rule = importlib.import_module("npu_migrate.rules.deps.npu850_torch_npu_requirement")
    calls = []
    real = rule._marker
    monkeypatch.setattr(rule, "_marker", lambda entry: calls.append(1) or real(entry))
    result = deps_engine.migrate("requirements.txt", _pins(300), Settings())
    assert sum(f.rule == "NPU850" for f in result.findings) == 300
    assert len(calls) <= 300, len(calls)  # the old code: 2 per pair of pins, 180,000


@pytest.mark.timeout(120)
def test_npu850_time_per_megabyte_of_torch_pins():
    """The most entries a dependency file may hold (2,000), every one a torch pin with
    markers: at most 60 s per MB (measured 10 s/MB here; the old code 180 s/MB)."""
    data = _pins(deps_engine.MAX_ENTRIES - 10)
    started = time.perf_counter()
    result = deps_engine.migrate("requirements.txt", data, Settings())
    seconds = time.perf_counter() - started
    assert result.error is None and len(result.findings) >= deps_engine.MAX_ENTRIES - 10
    assert seconds / (len(data) / (1 << 20)) < 60, f"{seconds:.1f} s for {len(data):,} bytes"


TIE = (b"dependencies:\n  - pytorch=2.5.1\n  - pip\n  - pip:\n"
       b"    - torch==2.1.0 ; platform_machine == 'aarch64'\n")


@pytest.mark.timeout(120)
def test_two_insertions_of_one_rule_at_one_place_give_one_answer_whatever_the_hash_seed(tmp_path):
    """NPU850 adds torch-npu after the pip list's last entry for the conda pytorch and for
    the pip torch; one is kept. Which one followed a set's order, so the same file got
    `torch-npu==2.5.*` in some runs and `torch-npu == 2.1.*; ...` in others."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = ("import sys\nfrom npu_migrate.deps import engine\nfrom npu_migrate.pipeline.settings import Settings\n"
              f"sys.stdout.write(engine.migrate('environment-npu.yml', {TIE!r}, Settings()).new_source.decode())\n")
    outputs = set()
    for seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(seed),
               "PYTHONPATH": os.pathsep.join([str(root), str(root / "runtime"), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True,
                              timeout=60, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1, outputs
    assert outputs.pop().endswith("    - torch-npu==2.5.*\n")  # the first torch of the file (conda's)


TEMPLATE = b"P=<ROOT>\nexport CUDA_VISIBLE_DEVICES=0,1\n"


@pytest.mark.timeout(90)
def test_a_shell_parse_is_bounded_in_time(monkeypatch):
    """tree-sitter-bash's error recovery is quadratic in the lines that are not shell: 330 KB
    of `P=<ROOT>` lines, each before a command, took 35 s a parse, and the shell front end
    parses such a file three times (the template reading); 2 MB would take hours."""
    from npu_migrate.pipeline import limits
    from npu_migrate.shell import engine as shell

    monkeypatch.setattr(limits, "MAX_PARSE_SECONDS", 1.0, raising=False)
    started = time.perf_counter()
    with pytest.raises(limits.LimitError, match="did not finish within 1 s of CPU"):
        shell.migrate("run.sh", b"#!/bin/bash\n" + TEMPLATE * 8000, Settings())
    assert time.perf_counter() - started < 30


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["shell", "dockerfile", "json"])
def test_a_bounded_parse_gives_the_trees_of_a_plain_parse(kind):
    """Read through a callback (the form tree-sitter checks for progress), every parser
    builds the same tree, for a file that parses and one that does not."""
    from npu_migrate.configs import json_reader
    from npu_migrate.dockerfile import parser as docker
    from npu_migrate.pipeline import limits
    from npu_migrate.shell import parser as bash

    make = {"shell": bash._parser, "dockerfile": docker._parser, "json": json_reader.parser}[kind]
    samples = {
        "shell": [b"export CUDA_VISIBLE_DEVICES=0 ; torchrun --nproc_per_node 8 train.py \"$@\"\n" * 3000,
                  TEMPLATE * 300],
        "dockerfile": [b"FROM x\n" + b"RUN CUDA_VISIBLE_DEVICES=0 torchrun train.py \\\n  --lr 1\n" * 3000,
                       b"FROM\nRUN <X>\n" * 300],
        "json": [b'{"a": [' + b'{"device": "cuda", "n": 1.5e3},' * 5000 + b'{}]}', b'{"a": <X>, "b": }\n' * 300],
    }[kind]
    for data in samples:
        plain = make().parse(data)
        bounded = limits.parse_bounded(make(), data, kind)
        assert str(bounded.root_node) == str(plain.root_node)
        assert bounded.root_node.end_byte == plain.root_node.end_byte == len(data)


@pytest.mark.timeout(60)
def test_the_parses_of_one_file_share_one_budget():
    """The shell front end parses a template three times, a notebook each bash cell: the
    budget is the file's, not each parse's; the next file starts afresh."""
    from npu_migrate.pipeline import limits
    from npu_migrate.shell import parser as bash

    with limits.parse_budget():
        limits.parse_bounded(bash._parser(), TEMPLATE * 300, "shell")
        limits._SPENT.get()[0] = limits.MAX_PARSE_SECONDS + 1  # as if the file's earlier parses had taken it all
        with pytest.raises(limits.LimitError):
            limits.parse_bounded(bash._parser(), TEMPLATE * 300, "shell")
    with limits.parse_budget():
        assert limits.parse_bounded(bash._parser(), TEMPLATE * 300, "shell").root_node.has_error


@pytest.mark.timeout(120)
def test_a_run_of_adjacent_ifs_is_judged_once(monkeypatch):
    """NPU010's NPU-aware chains: adjacent `if` statements count as one chain, and each
    device test inside was judged against every other one (12,000 adjacent `if
    torch.cuda.is_available():` blocks, 650 KB, gave no answer in 120 s)."""
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.python import npu_aware

    calls = []
    real = npu_aware.npu_mentions
    monkeypatch.setattr(npu_aware, "npu_mentions", lambda ctx, test: calls.append(1) or real(ctx, test))
    unit = "# requires CUDA\nif torch.cuda.is_available():\n    y = 2\n"
    result = migrate_safely("gates.py", ("import torch\n" + unit * 300).encode(), Settings())
    assert result.error is None and len(result.findings) == 300
    assert len(calls) <= 2 * 300, len(calls)  # the old code: one per pair, 90,000


@pytest.mark.timeout(120)
def test_a_statements_own_verdict_is_found_once(monkeypatch):
    """cuda_backend.region looked at the comments above a statement (and generated its
    code) once per device call in it: 5,000 `.cuda()` calls in one statement under 20,000
    comment lines gave no answer in 120 s."""
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.python import cuda_backend

    calls = []
    real = cuda_backend._comments_above
    monkeypatch.setattr(cuda_backend, "_comments_above", lambda node: calls.append(1) or real(node))
    source = "import torch\n" + "# requires CUDA only\n" * 50 + "xs = [" + "t.cuda(), " * 300 + "]\n"
    result = migrate_safely("many.py", source.encode(), Settings())
    assert result.error is None and len(result.fixes) == 301
    assert len(calls) <= 10, len(calls)  # the old code: one per call, 300



@pytest.mark.timeout(120)
def test_flags_are_matched_to_aware_chains_in_one_pass_per_scope(monkeypatch):
    """`cuda_fN = torch.cuda.is_available()` flags: each flag read every chain of its scope
    again (2,000 flags: 64 s, of which half here)."""
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.python import npu_aware

    calls = []
    real = npu_aware._groups
    monkeypatch.setattr(npu_aware, "_groups", lambda scope: calls.append(1) or real(scope))
    source = "import torch\n" + "".join(f"cuda_f{i} = torch.cuda.is_available()\n" for i in range(300))
    result = migrate_safely("flags.py", source.encode(), Settings())
    assert result.error is None and len(result.fixes) == 301
    assert len(calls) <= 5, len(calls)  # the old code: one per flag, 300


@pytest.mark.timeout(120)
def test_a_scopes_tests_are_indexed_once_for_all_its_flags(monkeypatch):
    """`cuda_fN = torch.cuda.is_available()` flags: cuda_only's flag gate walked the whole
    scope for each flag, looking for tests that name it (2,000 flags: 39 s, of which 34
    in that walk; now one walk per scope and a look-up per flag: 6 s)."""
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.python import cuda_only

    calls = []
    real = cuda_only._tests_in
    monkeypatch.setattr(cuda_only, "_tests_in", lambda scope: calls.append(1) or real(scope))
    source = "import torch\n" + "".join(f"cuda_f{i} = torch.cuda.is_available()\n" for i in range(300))
    result = migrate_safely("flags.py", source.encode(), Settings())
    assert result.error is None and len(result.fixes) == 301
    assert len(calls) <= 5, len(calls)  # the old code: one walk per flag, 300


@pytest.mark.timeout(120)
def test_a_blocks_assigned_names_are_read_once_for_all_its_cuda_flags(monkeypatch):
    """cuda_backend's NPU sibling (`cuda_ok` beside `npu_ok`): each `cuda_fN = ...` line
    searched its whole block's code with a regex of its own (6,000 flags: 16 of 64 s
    in that search; 25,000 gave no answer in 300 s)."""
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.python import cuda_backend

    calls = []

    class Counting:
        def findall(self, text):
            calls.append(1)
            return real.findall(text)

    real = cuda_backend._ASSIGNED
    monkeypatch.setattr(cuda_backend, "_ASSIGNED", Counting())
    source = "import torch\n" + "".join(f"cuda_f{i} = torch.cuda.is_available()\n" for i in range(300))
    result = migrate_safely("flags.py", source.encode(), Settings())
    assert result.error is None and len(result.fixes) == 301
    assert len(calls) == 1, len(calls)


@pytest.mark.parametrize("lines,sibling", [
    ('npu_ok = hasattr(torch, "npu")', "npu_ok"),
    ("NPU_OK: bool = False", "npu_ok"),  # any case, annotated
    ("f(\n    npu_ok\n    = 1)", "npu_ok"),  # a keyword at the start of a line counts, as it did
    ("npu_ok == 1", None),  # a comparison assigns nothing
    ("npu_ok_x = 1", None),  # a longer name
    ("größe = 1\nnpu_ok = 1", "npu_ok"),  # a non-ASCII name in the block: the regex decides
])
def test_the_npu_sibling_is_found_as_before(lines, sibling):
    from npu_migrate.pipeline.runner import migrate_safely

    source = f"import torch\n{lines}\ncuda_ok = torch.cuda.is_available()\n"
    result = migrate_safely("a.py", source.encode(), Settings())
    if sibling is None:
        assert result.new_source is not None and not result.findings
    else:
        assert result.new_source is None
        assert [f.message for f in result.findings] == [
            f"a CUDA flag beside this code's own NPU flag `{sibling}`; left unchanged"]


def test_a_long_s_is_an_s_to_the_sibling_search_as_before():
    """Python's IGNORECASE matches `ſ` (U+017F) with `s`; a block with a non-ASCII name is
    searched with the regex, so `npu_ſ` is still `cuda_s`'s sibling."""
    from npu_migrate.pipeline.runner import migrate_safely

    source = "import torch\nnpu_\u017f = 1\ncuda_s = torch.cuda.is_available()\n"
    result = migrate_safely("a.py", source.encode(), Settings())
    assert result.new_source is None and "`npu_s`" in result.findings[0].message


def _big_notebook(source: list[str], megabytes: int) -> str:
    """A notebook whose one code cell printed ``megabytes`` MB of lines."""
    import json

    lines = [f"step {i:08d} loss 0.5\n" for i in range(megabytes * (1 << 20) // 20 + 1)]
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1, "source": source,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": lines}]}]})


@pytest.mark.timeout(300)
def test_a_notebook_over_the_json_bound_is_one_line_and_the_rest_is_migrated(tmp_path, run_cli):
    """A 33 MB notebook (printed outputs) with a cell to migrate: the notebook bound is
    128 MB, but its cells are written back through the JSON reader (32 MB): one error
    line that says so and what to do, exit 2, the other files written; the same notebook
    with nothing to migrate is no error."""
    big = _big_notebook(["import torch\n", "x = torch.zeros(3).cuda()\n"], 33)
    (tmp_path / "big.ipynb").write_text(big)
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    result = run_cli("--write", "--no-cache", "-j", "1", ".")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: big.ipynb:1: ")
    assert "notebook with 1 cell(s) to migrate" in errors[0] and "--clear-output" in errors[0]
    assert "Traceback" not in result.output
    assert (tmp_path / "big.ipynb").read_text() == big
    assert ".npu()" in (tmp_path / "train.py").read_text()
    (tmp_path / "big.ipynb").write_text(_big_notebook(["x = 1\n"], 33))
    assert run_cli("--check", "--no-cache", "-j", "1", "big.ipynb").exit_code == 0
