"""bench/dense.py: which files the CUDA-dense set takes, and the grown file."""

from __future__ import annotations

import ast

from bench.corpus import Project
from bench.dense import cuda_uses, dense_tree, grown


def test_cuda_uses_counts_words_not_parts_of_words() -> None:
    data = b'x.cuda()\ntorch.cuda.synchronize()\nos.environ["CUDA_VISIBLE_DEVICES"]\n"nccl"\nNCCL_DEBUG\ncudagraph is_cuda_x\n'
    assert cuda_uses(data) == 5


def test_dense_tree_keeps_files_over_the_density(tmp_path) -> None:
    root = tmp_path / "src" / "pkg-1.0"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "dense.py").write_text("import torch\nx = torch.cuda.device_count()\n" + "y = 1\n" * 98)
    (root / "pkg" / "sparse.py").write_text("import torch\nx = 'cuda'\n" + "y = 1\n" * 998)
    (root / "pkg" / "none.py").write_text("y = 1\n")
    project = Project("pkg", "1.0", root, "pkg.whl", 1, 3, 1101)
    dense, stats = dense_tree([project], 4.0, tmp_path)
    assert [p.root for p in dense] == [tmp_path / "dense" / "pkg-1.0"]
    kept = sorted(p.relative_to(dense[0].root).as_posix() for p in dense[0].root.rglob("*.py"))
    assert kept == ["pkg/dense.py"]
    assert (stats["files"], stats["lines"], stats["uses"]) == (1, 100, 1)


def test_grown_repeats_lines_and_uses_and_stays_python() -> None:
    data = b"import torch\ndef f(x):\n    return x.cuda()"
    big = grown(data, 4)
    assert big.count(b"\n") == 12
    assert cuda_uses(big) == 4 * cuda_uses(data)
    ast.parse(big)


def test_engine_parse_input_is_what_the_engine_hands_libcst() -> None:
    import libcst

    from bench.dense import engine_parse_input

    assert engine_parse_input("plain.py", b"def f(x):\n    return x + 1\n") == (None, [])
    other = "".join(f"def helper{i}(x):\n    return x + {i}\n\n\n" for i in range(40))
    data = ("import torch\n\n\ndef to_gpu(x):\n    return x.cuda()\n\n\n" + other).encode()
    parsed, needed = engine_parse_input("train.py", data)
    assert needed and parsed is not None
    assert b"x.cuda()" in parsed and len(parsed) < len(data)  # the helpers were left out
    libcst.parse_module(parsed)
