"""A per-file result cache that can never put text into a file.

What a cache entry holds is a file's migrated source, which ``--write`` writes into
the user's tree; so an entry is trusted only if this user's npu-migrate wrote it,
for exactly this input (the threat model is in ``SECURITY.md``):

* **Where it lives.** By default in the user's own cache directory,
  ``$XDG_CACHE_HOME/npu-migrate`` (``~/.cache/npu-migrate``), one sub-directory per
  project (a hash of the project root's real path). Never in the repository: a
  repository can ship a ``.npu_migrate_cache/`` (``git add -f``, a tarball), and a
  shared, world-writable working directory can hold one another user planted.
  ``--cache-dir DIR`` puts it elsewhere, under the same checks.
* **Private, never through a link.** Every directory of the cache is created with
  mode 0700 and then checked with ``lstat``: it must be a real directory (not a
  symlink), owned by this user, and writable by nobody else, and every directory
  and link above it must be this user's or root's, and sticky where others can
  write (:func:`safe_ancestors`); otherwise the run goes on without a cache and
  says why in one warning line. Inside such a directory nobody else can plant
  anything, nor swap it for a link. A ``--cache-dir`` that holds anything but
  cache generations (``--cache-dir .``, a home directory) is refused: the cache
  removes old generations, and must never remove anything else. The ``.gitignore`` the cache writes (for a
  ``--cache-dir`` inside a checkout) is created with ``O_CREAT|O_EXCL|O_NOFOLLOW``.
* **Bound to its input and verified.** An entry's name is a hash of the tool
  version, a fingerprint of the engine's, rules' and parsers' code, the settings
  (selection, configuration, project facts), the file's path and a digest of its
  bytes. Its content carries an HMAC-SHA256 of that key and the payload, made with a
  per-user secret key (``<cache home>/key``, 32 random bytes, mode 0600, never in a
  repository). An entry that does not verify (planted, copied from another user or
  machine, edited) is ignored with a warning and recomputed. ``--write`` then still
  writes only over a file that has the very bytes the entry was keyed by.
* **Compact, and never in the way of writes.** Entries are zlib-compressed JSON;
  only one generation (tool version + code fingerprint) is kept per project, older
  ones are removed when a new one is made. Entries are buffered during the run and
  written (:meth:`Cache.flush`) only after the migrated files, so on a full disk
  the cache cannot take the space a write needs; the first ``ENOSPC`` stops caching
  for the run. ``--no-cache`` neither reads nor writes the cache.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import zlib
from pathlib import Path

from npu_migrate import __version__
from npu_migrate.pipeline.files import content_digest  # noqa: F401 - the key's content part
from npu_migrate.pipeline.model import FileResult

#: The old in-repository location: never read; discovery still skips it.
DIRNAME = ".npu_migrate_cache"
_MAGIC = b"npu-migrate-cache-2\n"
_MAC_SIZE = 32
_KEY_SIZE = 32
#: An entry larger than this is not read (a source file's migrated text, compressed).
MAX_ENTRY_BYTES = 64 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: The name of a generation directory (``<version>-<code fingerprint>``): nothing else
#: in a cache directory is ever removed.
GENERATION = re.compile(r"[0-9][0-9A-Za-z.+!_-]*-[0-9a-f]{16}")

#: The parsers whose versions decide results as much as our own code does.
PARSERS = ("libcst", "tree-sitter", "tree-sitter-bash", "tree-sitter-dockerfile",
           # config and dependency files, notebooks
           "pyyaml", "tomlkit", "tree-sitter-json", "packaging", "nbformat")


class UnsafeCache(Exception):
    """The cache directory cannot be trusted or made; ``str()`` is the one-line reason."""


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


def user_cache_home() -> Path:
    """``$XDG_CACHE_HOME/npu-migrate`` (an absolute XDG_CACHE_HOME only), else ``~/.cache/npu-migrate``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "npu-migrate"


def default_directory(root: Path) -> Path:
    """The cache directory of the project at ``root``, in the user's cache home."""
    tag = hashlib.blake2b(os.fsencode(os.path.realpath(root)), digest_size=10).hexdigest()
    return user_cache_home() / "projects" / tag


def private_dir(path: Path) -> None:
    """Make ``path`` (mode 0700) unless it exists; then insist that it is a real
    directory of this user that nobody else can write. Raises :class:`UnsafeCache`."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UnsafeCache(f"{path}: cannot create: {exc.strerror or exc}") from None
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UnsafeCache(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeCache(f"{path}: is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeCache(f"{path}: not a directory")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise UnsafeCache(f"{path}: owned by another user")
    if info.st_mode & 0o022:
        raise UnsafeCache(f"{path}: writable by other users (mode {stat.S_IMODE(info.st_mode):o})")


def safe_ancestors(path: Path) -> None:
    """Insist that nobody but this user and root can rename, replace or re-link a
    directory on the way to ``path`` (as ssh's StrictModes does): every directory
    above it, on the path as written and on its real path, is owned by this user or
    root and, if others can write to it, sticky (``/tmp``); every symbolic link on
    the way is owned by this user or root. Otherwise another user could swap the
    checked cache directory for a link between the check and a write or a clean-up.
    Raises :class:`UnsafeCache`."""
    if not hasattr(os, "geteuid"):
        return
    uid = os.geteuid()
    absolute = Path(os.path.abspath(path))
    real_parent = Path(os.path.realpath(absolute.parent))
    for directory in (*absolute.parents, real_parent, *real_parent.parents):
        try:
            info = os.lstat(directory)
        except OSError as exc:
            raise UnsafeCache(f"{directory}: {exc.strerror or exc}") from None
        if info.st_uid not in (0, uid):
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a directory"
            raise UnsafeCache(f"{directory}: on the cache's path, {what} owned by another user")
        if (stat.S_ISDIR(info.st_mode) and info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX):
            raise UnsafeCache(f"{directory}: on the cache's path, writable by other users and not sticky "
                              f"(mode {stat.S_IMODE(info.st_mode):o})")


def _read_private_file(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file of this user that only this user can read or
    write, opened without following a link; None if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_size > limit
                or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()) or info.st_mode & 0o077):
            return None
        return handle.read(limit + 1)


def secret_key(home: Path) -> bytes:
    """This user's cache key (``home/key``), made on first use. Raises :class:`UnsafeCache`."""
    try:
        home.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache: the user's, whatever its mode
    except OSError as exc:
        raise UnsafeCache(f"{home.parent}: cannot create: {exc.strerror or exc}") from None
    private_dir(home)
    path = home / "key"
    key = _read_private_file(path, _KEY_SIZE)
    if key is not None and len(key) == _KEY_SIZE:
        return key
    if os.path.lexists(path):
        raise UnsafeCache(f"{path}: not a private {_KEY_SIZE}-byte key file of this user; delete it")
    fd, tmp = tempfile.mkstemp(dir=home, prefix=".key-")  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(_KEY_SIZE))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # never replaces a key another run made meanwhile
        except FileExistsError:
            pass
    except OSError as exc:
        raise UnsafeCache(f"{path}: cannot create: {exc.strerror or exc}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    key = _read_private_file(path, _KEY_SIZE)
    if key is None or len(key) != _KEY_SIZE:
        raise UnsafeCache(f"{path}: not a private {_KEY_SIZE}-byte key file of this user; delete it")
    return key


def _write_gitignore(directory: Path) -> None:
    try:
        fd = os.open(directory / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except OSError:
        return  # there already, or a link someone planted: never written through
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("# Created by npu-migrate.\n*\n")


class Cache:
    """The cache of one run. ``get`` answers from verified entries only; ``put``
    buffers, and :meth:`flush` writes once the migrated files are written."""

    def __init__(self, directory: Path, settings_key: str, home: Path | None = None) -> None:
        self.root = Path(directory)
        self.home = home if home is not None else user_cache_home()
        self.settings_key = settings_key
        self._code = code_fingerprint()
        self.directory = self.root / f"{__version__}-{self._code[:16]}"
        #: One-line warnings for the user (an unsafe directory, entries that did not verify).
        self.warnings: list[str] = []
        self.pending: list[tuple[str, FileResult]] = []
        self._key: bytes | None = None
        self._usable: bool | None = None
        self._made: set[str] = set()

    def key(self, path: str, content: str) -> str:
        """The entry for ``path`` with content digest ``content`` (:func:`content_digest`)."""
        digest = hashlib.blake2b(digest_size=20)
        for part in (__version__, self._code, self.settings_key, path, content):
            digest.update(part.encode("utf-8", "surrogateescape"))
            digest.update(b"\0")
        return digest.hexdigest()

    def _open(self) -> bool:
        """Check (and make) the directories and load the key, once; False (with a
        warning) when the cache cannot be trusted."""
        if self._usable is None:
            try:
                self._key = secret_key(self.home)
                for parent in reversed(self.root.parents):
                    if parent == self.home or self.home in parent.parents:
                        private_dir(parent)  # ours: checked like the rest
                    elif not parent.exists():
                        os.mkdir(parent, 0o700)
                private_dir(self.root)
                safe_ancestors(self.home)
                safe_ancestors(self.root)
                foreign = sorted(name for name in os.listdir(self.root)
                                 if name != ".gitignore" and not GENERATION.fullmatch(name))
                if foreign:  # --cache-dir . or ~: never clean up (remove) what is not ours
                    raise UnsafeCache(f"{self.root}: not an npu-migrate cache directory (it holds {foreign[0]!r}); "
                                      "give a new or empty directory")
                self._usable = True
            except (UnsafeCache, OSError) as exc:
                self.warnings.append(f"cache not used: {exc}")
                self._usable = False
        return self._usable

    def _entry(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.bin"

    def _mac(self, key: str, payload: bytes) -> bytes:
        assert self._key is not None
        return hmac.new(self._key, key.encode("ascii") + b"\0" + payload, hashlib.sha256).digest()

    def get(self, path: str, key: str) -> FileResult | None:
        if not self._open():
            return None
        data = _read_private_file(self._entry(key), MAX_ENTRY_BYTES) if self.directory.is_dir() else None
        if data is None:
            return None
        head = len(_MAGIC) + _MAC_SIZE
        payload = data[head:]
        if not data.startswith(_MAGIC) or not hmac.compare_digest(data[len(_MAGIC):head], self._mac(key, payload)):
            self.warnings.append(f"{path}: cache entry did not verify (not written by this user's npu-migrate); "
                                 "ignored and recomputed")
            return None
        try:
            return FileResult.from_cache(path, json.loads(zlib.decompress(payload)))
        except (ValueError, TypeError, zlib.error):  # our own, but of an older shape
            return None

    def put(self, key: str, result: FileResult) -> None:
        if result.error is None:
            self.pending.append((key, result))

    def flush(self) -> None:
        """Write the buffered entries (after the files: see the module's docstring)."""
        pending, self.pending = self.pending, []
        if not pending or not self._open():
            return
        try:
            self._new_generation()
        except (UnsafeCache, OSError) as exc:
            self.warnings.append(f"cache not written: {exc}")
            return
        for key, result in pending:
            try:
                self._write(key, result)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    return  # the disk is full: no more entries this run
            except UnsafeCache as exc:
                self.warnings.append(f"cache not written: {exc}")
                return

    def _new_generation(self) -> None:
        if self.directory.name in self._made:
            return
        _write_gitignore(self.root)
        if not os.path.lexists(self.directory):
            for old in self.root.iterdir():  # older generations: never hit again
                if GENERATION.fullmatch(old.name) and not old.is_symlink() and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
        private_dir(self.directory)
        self._made.add(self.directory.name)

    def _write(self, key: str, result: FileResult) -> None:
        entry = self._entry(key)
        if entry.parent.name not in self._made:
            private_dir(entry.parent)
            self._made.add(entry.parent.name)
        payload = zlib.compress(json.dumps(result.to_cache(), separators=(",", ":")).encode("utf-8"), 6)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")  # O_EXCL|O_NOFOLLOW, 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_MAGIC + self._mac(key, payload) + payload)
            os.replace(tmp, entry)
        except BaseException:  # an interrupt included: no temp file left behind
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
