"""vLLM on Ascend: the vllm-ascend plugin and how its versions pair with vLLM's
(plain data, shared by the Python, shell and dependency-file rules).

Sources: vllm-ascend's versioning policy ("from vLLM 0.7.x on, vLLM Ascend follows
PEP 440 and releases versions matching vLLM's"; its compatibility matrix pairs
vllm-ascend vX.Y.Z[rcN|.postN] with vLLM vX.Y.Z) and its README ("vLLM (the same
version as vllm-ascend)"); the releases on PyPI from ``pip index versions
vllm-ascend`` (checked 2026-11-27: 0.23.0.post1, 0.23.0, 0.18.0, 0.13.0, 0.11.0, 0.9.1,
0.7.3.post1, 0.7.3); the image from vllm-ascend's quick start
(``quay.io/ascend/vllm-ascend:v<version>``).
"""

from __future__ import annotations

#: vLLM versions that a vllm-ascend release on PyPI pairs with (final releases only)
PAIRED = ("0.7.3", "0.9.1", "0.11.0", "0.13.0", "0.18.0", "0.23.0")
IMAGE = "quay.io/ascend/vllm-ascend:v<version>"
ROUTE = (
    "install the vllm-ascend plugin next to vllm, at the same version (vllm-ascend X.Y.Z pairs with vllm X.Y.Z; "
    f"PyPI has {', '.join(PAIRED)}), or run in its image {IMAGE}; nothing else changes: vLLM finds the plugin "
    "at start-up, and the command line and the Python API stay the same (quantization methods, attention "
    "backends and custom ops must be ones vllm-ascend supports)"
)


def pairing(version: str) -> str | None:
    """The vllm-ascend requirement that pairs with ``vllm==version`` (None if no release pairs)."""
    return f"vllm-ascend=={version}.*" if version in PAIRED else None
