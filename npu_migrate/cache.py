"""A per-file result cache, like ruff's.

Entries are keyed by a hash of the file's bytes, its path, the tool version, a
fingerprint of the engine's and rules' sources, and the settings (rule selection, config, project facts). They live in
``.npu_migrate_cache/`` at the project root, which gets its own ``.gitignore``.
A missing, stale or corrupt entry (not JSON, or JSON of the wrong shape) is
simply recomputed and rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from npu_migrate import __version__
from npu_migrate.files import content_digest  # noqa: F401 - the key's content part
from npu_migrate.model import FileResult

DIRNAME = ".npu_migrate_cache"


#: The parsers whose versions decide results as much as our own code does.
PARSERS = ("libcst", "tree-sitter", "tree-sitter-bash", "tree-sitter-dockerfile",
           # config and dependency files, notebooks
           "pyyaml", "tomlkit", "tree-sitter-json", "packaging", "nbformat")


@functools.cache
def code_fingerprint() -> str:
    """A hash of the engine's and the rules' own sources and data, and of the
    parsers' versions, so that an editable install, a patched rule or an upgraded
    grammar never serves stale results."""
    from importlib import metadata

    import npu_migrate
    import npu_migrate.rules

    digest = hashlib.blake2b(digest_size=16)
    for name in PARSERS:
        try:
            digest.update(f"{name}={metadata.version(name)};".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=none;".encode())
    roots = [Path(npu_migrate.__file__).parent, *map(Path, npu_migrate.rules.__path__)]
    for root in roots:
        for file in sorted(root.rglob("*")):
            if file.suffix in (".py", ".json") and "emulate" not in file.parts:
                digest.update(file.relative_to(root).as_posix().encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


class Cache:
    def __init__(self, directory: Path, settings_key: str) -> None:
        self.directory = directory / __version__
        self.settings_key = settings_key
        self._ready = False
        self._code = code_fingerprint()

    def key(self, path: str, content: str) -> str:
        """The entry for ``path`` with content digest ``content`` (:func:`content_digest`)."""
        digest = hashlib.blake2b(digest_size=20)
        for part in (__version__, self._code, self.settings_key, path, content):
            digest.update(part.encode("utf-8", "surrogateescape"))
            digest.update(b"\0")
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, path: str, key: str) -> FileResult | None:
        try:
            data = json.loads(self._entry(key).read_text(encoding="utf-8"))
            return FileResult.from_cache(path, data)
        except (OSError, ValueError, TypeError):  # TypeError: JSON of the wrong shape
            return None

    def put(self, key: str, result: FileResult) -> None:
        if result.error is not None:
            return
        entry = self._entry(key)
        try:
            if not self._ready:
                self.directory.mkdir(parents=True, exist_ok=True)
                gitignore = self.directory.parent / ".gitignore"
                if not gitignore.exists():
                    gitignore.write_text("# Created by npu-migrate.\n*\n", encoding="utf-8")
                self._ready = True
            entry.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        except OSError:
            return  # a read-only project still works, just without a cache
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(result.to_cache(), handle)
            os.replace(tmp, entry)
        except BaseException as exc:  # an interrupt included: no temp file left behind
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if not isinstance(exc, OSError):
                raise
