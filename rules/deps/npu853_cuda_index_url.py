"""NPU853: report CUDA wheel indexes and CUDA wheel URLs in dependency files."""

from __future__ import annotations

from npu_migrate.deps.rule import DepsRule, Example
from npu_migrate.tables.packages import CUDA_INDEX_URL


class CudaIndexUrl(DepsRule):
    id = "NPU853"
    impact = "blocking"
    name = "cuda-index-url"
    summary = "Report CUDA wheel indexes (`--index-url https://download.pytorch.org/whl/cu118`, NVIDIA's PyPI) and CUDA wheel URLs"
    fixable = False
    triggers = (b"download.pytorch.org", b"nvidia.com", b"nvidia")
    rationale = """
`--index-url` / `--extra-index-url` / `--find-links` pointing at PyPI's CUDA
mirrors (`https://download.pytorch.org/whl/cu121`, `pypi.nvidia.com`,
`pypi.ngc.nvidia.com`) install CUDA builds; so do direct wheel URLs under
them (`torch @ https://download.pytorch.org/whl/cu118/torch-...whl`), uv and
Poetry index tables in `pyproject.toml`, and the `nvidia` conda channel. On
Ascend, torch comes from PyPI (aarch64) or the CPU index
(`https://download.pytorch.org/whl/cpu`, x86_64), and torch-npu from PyPI.
"""
    examples = (
        Example("--extra-index-url https://download.pytorch.org/whl/cu121  # reported\ntorch==2.1.0\n"),
        Example("--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.1.0\n"),
    )

    def check(self, document) -> None:
        for index in document.indexes:
            if index.what == "conda channel" and index.url == "nvidia":
                self.report(index.start, index.statement, "the `nvidia` conda channel serves CUDA packages",
                            "drop it: torch-npu and torch's CPU build come from PyPI")
            elif CUDA_INDEX_URL.search(index.url):
                self.report(index.start, index.statement, f"{index.what} `{index.url}` serves CUDA builds",
                            "use https://download.pytorch.org/whl/cpu (x86_64) or PyPI (aarch64) for torch; "
                            "torch-npu comes from PyPI")
