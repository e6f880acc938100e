"""Bounds found by adversarial round 5 (issue 38): dependency files, shell scripts and
Dockerfiles full of commands every rule fixes (each a bounded run; the old code gave no
answer in 60 s on 2 MB of them)."""

from __future__ import annotations

import time

import pytest

from npu_migrate.deps import engine as deps_engine
from npu_migrate.pipeline import limits
from npu_migrate.pipeline.settings import Settings
from npu_migrate.shell import parser

PIN = b"torch==2.1.0+cu118 --extra-index-url https://download.pytorch.org/whl/cu118\n"


@pytest.mark.timeout(120)
def test_a_requirements_file_past_the_entry_bound_is_one_error_line():
    data = PIN * (deps_engine.MAX_ENTRIES + 1)
    started = time.perf_counter()
    result = deps_engine.migrate("requirements.txt", data, Settings())
    assert time.perf_counter() - started < 20
    assert result.error is not None and "more than the 2,000" in result.error and result.new_source is None


@pytest.mark.timeout(120)
def test_torch_pins_are_parsed_once_per_entry(monkeypatch):
    """The rules compare each torch entry with the others: 1,300 pins took 45 s when each
    comparison parsed the requirement again."""
    from npu_migrate.deps import pairing

    calls = []
    real = pairing.parse
    monkeypatch.setattr(pairing, "parse", lambda text: calls.append(text) or real(text))
    deps_engine.migrate("requirements.txt", PIN * 300, Settings())
    assert len(calls) <= 2 * 300, len(calls)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("kind", "unit"), [("shell", b"CUDA_VISIBLE_DEVICES=0 torchrun train.py\n"),
                                            ("dockerfile", b"RUN CUDA_VISIBLE_DEVICES=0 torchrun train.py\n")])
def test_shell_and_dockerfiles_past_two_megabytes_are_refused(kind, unit):
    data = unit * (limits.MAX_BYTES[kind] // len(unit) + 1)
    with pytest.raises(limits.LimitError, match="larger than the 2 MB"):
        limits.check(data, kind)


@pytest.mark.timeout(60)
def test_points_come_from_one_line_index_per_file(monkeypatch):
    """tree-sitter's points for each RUN instruction were found by counting line ends from
    the start of the file (a 1 MB Dockerfile of RUN lines: 29 s)."""
    data = b"FROM x\n" + b"RUN a\n" * 2000 + b"tail"
    for offset in (0, 1, 6, 7, 100, len(data) - 1, len(data)):
        row = data.count(b"\n", 0, offset)
        assert parser.point(data, offset) == (row, offset - (data.rfind(b"\n", 0, offset) + 1))
    parser._lines.cache_clear()
    built = []
    from npu_migrate.pipeline import edits

    real = edits.LineIndex.__init__
    monkeypatch.setattr(edits.LineIndex, "__init__", lambda self, d: built.append(1) or real(self, d))
    for offset in range(0, len(data), 7):
        parser.point(data, offset)
    assert len(built) == 1


@pytest.mark.timeout(120)
def test_a_dockerfile_of_run_lines_is_linear():
    from npu_migrate.dockerfile import engine as docker

    unit = b"RUN CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node 8 train.py\n"
    times = []
    for n in (1500, 6000):
        started = time.perf_counter()
        docker.migrate("Dockerfile", b"FROM x\n" + unit * n, Settings())
        times.append(time.perf_counter() - started)
    assert times[1] < 8 * times[0] + 1, times  # 4x the lines: was about 15x the time


@pytest.mark.timeout(120)
def test_the_project_facts_scan_is_linear_on_hostile_text():
    """The facts' patterns (Python versions, JIT builds, relative imports, defined names) on
    one long line of their own prefixes: 4x the text, not 16x the time."""
    from npu_migrate.pipeline.facts import ProjectFacts

    times = []
    for n in (10000, 40000):
        text = b"conda create python " * n + b"x.y.z.load" * n + b"from ." * n + b"self.a" * n
        started = time.perf_counter()
        ProjectFacts.scan([("/p/INSTALL.md", text), ("/p/a.py", text), ("/p/b.py", b"\n" * n)])
        times.append(time.perf_counter() - started)
    assert times[1] < 8 * times[0] + 1, times
