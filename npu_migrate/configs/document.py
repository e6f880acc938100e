"""The neutral view of a config file that every reader builds and every rule reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scalar:
    """A string scalar of the file: a value, or a mapping key (``is_key``).

    ``start``/``end`` are byte offsets of its text in the file, quotes included;
    ``keys`` are the mapping keys from the document root down to it (sequence
    positions are not keys: in ``devices: [cuda:0]`` the scalar's key is
    ``devices``). ``quote`` is the quoting the text uses (``""`` for a YAML
    plain scalar, a single or double quote, three of them for TOML's
    multi-line strings), or None when the text is not
    the value between quotes (escapes, block scalars): such a scalar is never
    rewritten, only reported.
    """

    value: str
    start: int
    end: int
    keys: tuple[str, ...]
    is_key: bool = False
    quote: str | None = '"'

    @property
    def key(self) -> str | None:
        """The mapping key that holds this value (for a key: its parent's key)."""
        keys = self.keys[:-1] if self.is_key else self.keys
        return keys[-1] if keys else None

    @property
    def editable(self) -> bool:
        return self.quote is not None

    def render(self, value: str) -> str:
        """``value`` written with this scalar's quoting."""
        assert self.quote is not None
        return f"{self.quote}{value}{self.quote}"

    @property
    def dotted(self) -> str:
        return ".".join(self.keys)


@dataclass
class Document:
    """What a reader found in one file."""

    #: The format, for messages: ``YAML``, ``JSON``, ``TOML``.
    format: str
    #: Every string scalar (keys included), in the order they appear.
    scalars: list[Scalar] = field(default_factory=list)
    #: The comment marker of the format (None: the format has no comments).
    comment: bytes | None = b"#"
    #: Byte ranges of strings that contain a suppression marker's text: a ``#``
    #: inside them does not start a comment.
    strings_with_marks: list[tuple[int, int]] = field(default_factory=list)


def decode(data: bytes) -> str:
    """The file's text; ReadError names the line of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadError(data[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None


class ReadError(Exception):
    """The file is not valid in its format: ``line`` (1-based) and a message.
    ``syntax``: its parser refused the text (not a size, nesting or encoding bound),
    the one case where a template's markers make it a template instead
    (:mod:`npu_migrate.configs.templates`)."""

    def __init__(self, line: int, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.syntax = syntax
