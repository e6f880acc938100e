"""Writing a small project tree for an engine test."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, rel: str, text: str) -> Path:
    """``text`` at ``root/rel``, its folders made as needed."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
