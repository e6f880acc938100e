"""tree-sitter with the Dockerfile grammar (``tree-sitter-dockerfile``), created once."""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter


@functools.cache
def _parser() -> tree_sitter.Parser:
    import tree_sitter
    import tree_sitter_dockerfile

    with warnings.catch_warnings():
        # The grammar package still hands its language over as an int (a deprecated
        # form that tree-sitter 0.26 accepts); nothing for our users to act on.
        warnings.simplefilter("ignore", DeprecationWarning)
        return tree_sitter.Parser(tree_sitter.Language(tree_sitter_dockerfile.language()))


def parse(data: bytes) -> tree_sitter.Tree:
    """The grammar does not take ``\\`` + CRLF as a line continuation, nor (when a
    comment line follows) ``\\`` + blank + LF, so it reads ``\\`` CRLF as `` \\`` LF
    and other CRLFs as `` \n``: the same length, so every offset is the file's. Shell
    parts are parsed from the original bytes (tree-sitter-bash handles CRLF)."""
    from npu_migrate.pipeline.limits import parse_bounded

    return parse_bounded(_parser(), data.replace(b"\\\r\n", b" \\\n").replace(b"\r\n", b" \n"), "Dockerfile")
