"""Markdown is linear in the worst case (issue 38 item 4): a 2 MB README of `[` did not
finish in 75 s; markdown-it-py's inline and link-reference rules are quadratic on runs
of brackets. Fences are found from the block structure alone, files without a shell
fence are not parsed, and a file past MAX_LINES / MAX_CHARS is one line, skipped."""

from __future__ import annotations

import time

import pytest

from npu_migrate.markdown import engine
from npu_migrate.pipeline.runner import migrate_safely
from npu_migrate.pipeline.settings import Settings

FENCE = "```bash\ntorchrun --nproc_per_node 8 train.py --device cuda\n```\n"
MB = 1 << 20

#: Seconds per case; measured 0.0-0.2 s for the 2-4 MB cases and up to 5 s for 20,000
#: lines of nested list fences on a loaded 2-core machine (the old code: minutes).
BOUND_S = 20


def _time(text: str):
    start = time.perf_counter()
    result = migrate_safely("README.md", text.encode(), Settings())
    return time.perf_counter() - start, result


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fence", [False, True])
@pytest.mark.parametrize("unit", ["[", "![", "[a](", "<", "[\n", "[]:\n", "- x\n", "# x\n", "`", "*_"])
def test_adversarial_readmes_of_a_few_megabytes_finish_in_bounded_time(unit, fence):
    text = (FENCE if fence else "") + unit * (3 * MB // len(unit))
    elapsed, result = _time(text)
    assert elapsed < BOUND_S, f"{unit!r}: {elapsed:.1f} s"
    assert result.new_source is None
    if fence and unit.count("\n") and text.count("\n") > engine.MAX_LINES:
        assert result.error is not None and "skipped" in result.error and "\n" not in result.error


@pytest.mark.timeout(300)
@pytest.mark.parametrize("unit", ["- x\n", "# x\n", "[\n", "- ```bash\n", "> - ```sh\n", "x\n===\n"])
def test_the_largest_file_parsed_stays_within_seconds(unit):
    lines = engine.MAX_LINES - 10
    text = FENCE + unit * (lines // unit.count("\n"))
    elapsed, result = _time(text)
    assert result.error is None
    assert elapsed < BOUND_S, f"{unit!r}: {elapsed:.1f} s"


def test_fences_are_still_found_in_lists_and_block_quotes():
    text = "# T\n\n[ref]: http://x\n\n- item\n\n  ```bash\n  python train.py --device cuda\n  ```\n\n> ```sh\n> torchrun x.py\n> ```\n"
    blocks = engine.shell_blocks(text)
    assert [(line, indent) for line, indent, _ in blocks] == [(8, 2), (12, 0)]


@pytest.mark.timeout(300)
def test_a_write_over_hostile_readmes_leaves_them_byte_identical_in_bounded_time(tmp_path, run_cli):
    """The attack of issue 38 through the command line: 2 MB READMEs of `[`, backticks, `![`,
    `<`, nested list fences and a shell fence before a run of `[`; `--write` reads them all
    in bounded time and leaves every byte as it was (Markdown is never written)."""
    shapes = {
        "README.md": "[" * (2 * MB),
        "docs/backticks.md": "`" * (2 * MB),
        "docs/images.md": "![" * MB,
        "docs/angles.md": "<" * (2 * MB),
        "docs/nested.md": FENCE + "- ```bash\n" * (engine.MAX_LINES - 10),
        "docs/fenced.md": FENCE + "[" * (2 * MB),
        "docs/too_big.md": FENCE + "[\n" * MB,
    }
    for name, text in shapes.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(text.encode())
    (tmp_path / "train.py").write_bytes(b"import torch\nn = torch.cuda.device_count()\n")
    start = time.perf_counter()
    result = run_cli("--write", "--no-cache", ".")
    elapsed = time.perf_counter() - start
    assert "Traceback" not in result.output
    for name, text in shapes.items():
        assert (tmp_path / name).read_bytes() == text.encode(), name
    assert b"torch.npu" in (tmp_path / "train.py").read_bytes()  # the others are still processed
    assert "too_big.md:1: a Markdown file of" in result.output and "skipped" in result.output
    assert elapsed < 3 * BOUND_S, f"{elapsed:.1f} s"
