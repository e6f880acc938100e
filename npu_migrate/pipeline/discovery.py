"""Which files to process.

* Directories are searched recursively for every supported file type
  (``npu_migrate/pipeline/filetypes.py``: ``*.py``, shell scripts by suffix or shebang,
  Dockerfiles).
* ``.git``, virtualenvs (any directory with a ``pyvenv.cfg``), ``build``, ``dist``
  (unless it is a package, with an ``__init__.py``), ``__pycache__`` and tool caches
  are skipped, and so is whatever the
  ``.gitignore`` files of the enclosing git checkout ignore (via pathspec),
  except files git tracks (``git ls-files``, asked once per directory given,
  only when a ``.gitignore`` rule matched something): a DeepSpeed config
  force-added under an ignored ``configs/`` is part of the project.
* ``exclude`` globs (gitignore syntax) are relative to the config root.
* A file named explicitly on the command line is always processed if some front
  end handles it (its name, suffix or shebang says which); otherwise it gets a
  one-line "not a supported file type" warning. With ``force_exclude``
  (``--force-exclude``, for pre-commit, which names every staged file) ``exclude``
  and the skipped directories apply to it too.
* Paths that do not exist and broken symlinks become one-line errors.
* Only regular files are read: a FIFO, socket or device is skipped with a
  warning (reading a FIFO would block forever).
* Symbolic links met while walking a directory are not followed: one that
  points outside the given paths is reported (a warning); one that points inside
  is skipped quietly, its target being processed under its own name. Each file
  is processed once, however many names it has.
* Temp files that a killed ``--write`` left behind (``.npu-migrate-*.tmp``) in
  the directories searched, or beside the files named, are collected for removal.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from npu_migrate.pipeline import filetypes
from npu_migrate.pipeline.files import kind
from npu_migrate.pipeline.writer import is_temp_name

SKIP_DIRS = {
    ".git", ".hg", ".svn", "__pycache__", "build", "dist", ".venv", "venv", ".tox", ".nox",
    ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".npu_migrate_cache", "node_modules",
    "site-packages",
}

#: `build/` and `dist/` are skipped as build output, unless they are Python packages
#: (mmengine has `mmengine/dist/`, a package of distributed helpers).
PACKAGE_NAMES_OK = {"build", "dist"}


@dataclass
class Discovered:
    files: list[str] = field(default_factory=list)  # display paths, as the user will see them
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # skipped, but not a failure
    #: directories holding a marked runtime copy (``<dir>/npu_runtime``, --vendor-runtime)
    vendored: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # temp files of earlier runs (writer.remove_leftovers)


def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def invalid_pattern(patterns: list[str]) -> str | None:
    """The first of ``patterns`` that is not a valid gitignore-style pattern (a lone
    ``!``, a trailing ``\\``), or None."""
    try:
        pathspec.GitIgnoreSpec.from_lines(patterns)
        return None
    except Exception:  # noqa: BLE001 - pathspec's error classes differ between versions
        pass
    for pattern in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except Exception:  # noqa: BLE001
            return pattern
    return None


#: A pattern is matched by pathspec's backtracking regular expression: each wildcard run
#: multiplies the worst case by the path's length. Measured on one 4,000-character path:
#: ``a/**/a/**/b`` (2 runs across directories) 0.1 s, ``a/**/a/**/a/**/b`` (3) 44 s;
#: ``*a*a*b`` (3 runs within a name) 0.06 s, ``*a*a*a*b`` (4) 3.3 s; a 50 MB line of NUL bytes
#: (one pattern) did not finish in 60 s. Real ignore files stay far below these bounds.
MAX_CROSS_RUNS = 2  # ``**`` (``.*`` / ``.+`` in the regex), the implicit leading one included
MAX_NAME_RUNS = 3  # ``*`` within a name (``[^/]*``)
MAX_PATTERN_CHARS = 1024
#: An ignore file larger than this is not read (one error line, as past MAX_IGNORE_PATTERNS).
MAX_IGNORE_BYTES = 1 << 20


def git_stars(pattern: str) -> str:
    """``pattern`` with its runs of asterisks read as git reads them: ``**`` is "any
    directories" only as a whole path component (``**/x``, ``a/**/b``, ``a/**``); other
    consecutive asterisks are one ``*`` (gitignore(5)). vLLM production-stack's
    ``/testdata/**legacy**`` is ``/testdata/*legacy*``; pathspec compiled it as two
    cross-directory runs and the bound below refused the whole file (the run exited 2).
    An escaped asterisk (``\\*``) is a literal one and starts no run: ``a\\**b`` is a
    literal ``*`` then a wildcard (a regex over the text joined the two into one ``*``,
    and ``a*xb`` that git ignores was migrated)."""
    if "**" not in pattern:
        return pattern
    out: list[str] = []
    i, size = 0, len(pattern)
    while i < size:
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if char != "*":
            out.append(char)
            i += 1
            continue
        end = i
        while end < size and pattern[end] == "*":
            end += 1
        if end - i == 1:
            out.append("*")
        else:
            whole = (i == 0 or pattern[i - 1] == "/") and (end == size or pattern[end] == "/")
            out.append("**" if whole else "*")
        i = end
    return "".join(out)


def costly_pattern(patterns: list[str]) -> tuple[int, str] | None:
    """(index, why) of the first of ``patterns`` too costly to match (see MAX_CROSS_RUNS), or None."""
    patterns = [git_stars(p) for p in patterns]
    for index, pattern in enumerate(patterns):
        if len(pattern) > MAX_PATTERN_CHARS:
            return index, f"a pattern of {len(pattern):,} characters (at most {MAX_PATTERN_CHARS:,})"
        if "*" not in pattern:
            continue
        try:
            compiled = pathspec.GitIgnoreSpec.from_lines([pattern]).patterns
        except Exception:  # noqa: BLE001 - an invalid pattern is invalid_pattern's to report
            continue
        regex = compiled[0].regex.pattern if compiled and getattr(compiled[0], "regex", None) is not None else ""
        cross = regex.count(".+") + regex.count(".*")
        name = regex.count("[^/]*")
        if cross > MAX_CROSS_RUNS or name > MAX_NAME_RUNS:
            return index, (f"{pattern!r} has more wildcards than npu-migrate matches in bounded time "
                           f"(at most {MAX_CROSS_RUNS} '**' and {MAX_NAME_RUNS} '*' in a name)")
    return None


#: Lines git reads as matching nothing (trailing spaces stripped, as git strips them): a
#: lone ``!`` (pathspec rejects it) and a lone ``/`` or ``!/`` (an empty name; pathspec reads
#: ``!/`` as un-ignoring every path below a directory).
_MATCH_NOTHING = frozenset({"!", "/", "!/"})


def gitignore_spec(lines: list[str]) -> pathspec.PathSpec:
    """A ``.gitignore``'s patterns; a line git ignores as matching nothing or invalid (a lone
    ``!``, ``!/``) is left out, as git does, instead of failing the run or matching."""
    lines = [git_stars(line) for line in lines if line.rstrip(" ") not in _MATCH_NOTHING]
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # noqa: BLE001 - see invalid_pattern
        return pathspec.GitIgnoreSpec.from_lines([line for line in lines if invalid_pattern([line]) is None])


#: More patterns than this in one ignore file are not read: pathspec compiles each one and
#: matches every path against all of them (300,000 patterns took minutes; real
#: repositories' ignore files hold tens to hundreds).
MAX_IGNORE_PATTERNS = 10_000


class _IgnoreStack:
    """gitignore rules of every directory from the git root down."""

    def __init__(self) -> None:
        self.specs: list[tuple[Path, pathspec.PathSpec]] = []
        self.errors: list[str] = []

    def load(self, directory: Path) -> None:
        gitignore = directory / ".gitignore"
        if gitignore.is_file():
            try:
                with open(gitignore, "rb") as f:
                    data = f.read(MAX_IGNORE_BYTES + 1)
            except OSError:
                return
            if len(data) > MAX_IGNORE_BYTES:
                self.errors.append(f"{gitignore}:1: larger than the {MAX_IGNORE_BYTES >> 20} MB npu-migrate reads "
                                   "from one ignore file; its rules were not applied")
                return
            lines = data.decode("utf-8", errors="replace").splitlines()
            patterns = sum(1 for line in lines if line.strip() and not line.startswith("#"))
            if patterns > MAX_IGNORE_PATTERNS:
                self.errors.append(f"{gitignore}:1: {patterns} patterns, more than the {MAX_IGNORE_PATTERNS:,} "
                                   "npu-migrate reads from one ignore file; its rules were not applied")
                return
            costly = costly_pattern([line.rstrip() for line in lines])
            if costly is not None:
                self.errors.append(f"{gitignore}:{costly[0] + 1}: {costly[1]}; its rules were not applied")
                return
            self.specs.append((directory, gitignore_spec(lines)))

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in self.specs:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(rel + "/" if is_dir else rel):
                return True
        return False


class _Tracked:
    """The files git tracks below a directory, asked on first use (``git ls-files``);
    empty where git is missing or fails."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._files: frozenset[Path] | None = None
        self._dirs: frozenset[Path] = frozenset()

    def _load(self) -> None:
        try:
            out = subprocess.run(["git", "-C", str(self.top), "ls-files", "-z", "--cached"],
                                 capture_output=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            out = b""
        files = {self.top / os.fsdecode(name) for name in out.split(b"\0") if name}
        self._files = frozenset(files)
        self._dirs = frozenset(parent for file in files for parent in file.parents
                               if parent == self.top or self.top in parent.parents)

    def file(self, path: Path) -> bool:
        if self._files is None:
            self._load()
        return path in self._files

    def holds(self, directory: Path) -> bool:
        """Some tracked file lies below ``directory``."""
        if self._files is None:
            self._load()
        return directory in self._dirs


#: what ``--vendor-runtime`` writes (npu_migrate/cli/vendor.py): ``<dir>/npu_runtime`` marked so
VENDORED_PACKAGE = "npu_runtime"
VENDORED_MARKER = ".npu-migrate-vendored"


def _skipped_dir(directory: Path) -> bool:
    name = directory.name
    if name in SKIP_DIRS and not (name in PACKAGE_NAMES_OK and (directory / "__init__.py").exists()):
        return True
    # a runtime copy written by --vendor-runtime (npu_migrate/cli/vendor.py): never migrated
    return (directory / "pyvenv.cfg").exists() or name.endswith(".egg-info") or (
        directory / VENDORED_MARKER).is_file()


def _matcher(exclude: list[str], root: Path):
    excluded = pathspec.GitIgnoreSpec.from_lines(exclude)

    def is_excluded(path: Path, is_dir: bool) -> bool:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = path.as_posix()
        return excluded.match_file(rel + "/" if is_dir else rel)

    return is_excluded


def force_excluded(path: str, exclude: list[str], root: Path) -> bool:
    """Whether ``--force-exclude`` drops ``path`` although it was named explicitly:
    ``exclude`` matches it or a directory above it (below ``root``), or such a
    directory is one discovery skips."""
    is_excluded = _matcher(exclude, root)
    full = Path(path).absolute()
    return is_excluded(full, False) or any(
        is_excluded(parent, True) or _skipped_dir(parent)
        for parent in full.parents if parent == root or root in parent.parents
    )


def discover(paths: list[str], exclude: list[str], root: Path, force_exclude: bool = False,
             outputs: Iterable[str] = (), recursive: bool = True) -> Discovered:
    """``outputs``: the files this run writes (``--report``, ``--output-file``); a
    directory walk skips them (a JSON report in the tree is a config file otherwise).
    ``recursive=False``: a directory's own files only, its subfolders not searched."""
    found = Discovered()
    is_excluded = _matcher(exclude, root)
    seen: set[tuple[int, int]] = set()
    scanned: set[str] = set()
    roots: list[Path] = []
    own = {Path(o).absolute() for o in outputs}

    def add(path: Path, info: os.stat_result) -> None:
        key = (info.st_dev, info.st_ino)
        if key not in seen:
            seen.add(key)
            found.files.append(_display(path))

    def regular(path: Path, info: os.stat_result, report: bool = True) -> bool:
        if stat.S_ISREG(info.st_mode):
            return True
        if report:
            found.warnings.append(f"{_display(path)}: {kind(info.st_mode)}, not a regular file; skipped")
        return False

    def not_followed(link: Path, what: str) -> None:
        """A symlink met in a walk: reported if it leads outside the given paths."""
        if not roots:
            roots.extend(Path(os.path.realpath(p)) for p in paths)
        target = Path(os.path.realpath(link))
        if not any(target.is_relative_to(r) for r in roots):
            found.warnings.append(f"{_display(link)}: symbolic link to {what} {target}, outside the given paths; not followed")

    def walked(path: Path, known: bool) -> os.stat_result | None:
        """The file's stat if a directory walk should process it; reported if not, when
        its name says it is of a supported type (others are only candidates)."""
        try:
            info = path.lstat()
        except OSError as exc:  # gone since the directory was listed
            if known:
                found.errors.append(f"{_display(path)}: cannot read: {exc.strerror or exc}")
            return None
        if stat.S_ISLNK(info.st_mode):
            if not path.exists():
                if known:
                    found.errors.append(f"{_display(path)}: broken symbolic link")
            elif known:
                not_followed(path, "file")
            return None
        return info if regular(path, info, report=known) else None

    def collect_leftovers(directory: str) -> None:
        if directory not in scanned:
            scanned.add(directory)
            try:
                names = os.listdir(directory or ".")
            except OSError:
                return
            found.leftovers.extend(os.path.join(directory, name) for name in names if is_temp_name(name))

    for raw in paths:
        path = Path(raw)
        if not path.exists():
            reason = "broken symbolic link" if path.is_symlink() else "no such file or directory"
            found.errors.append(f"{raw}: {reason}")
            continue
        if not path.is_dir():
            if force_exclude and force_excluded(raw, exclude, root):
                continue
            if any((parent / VENDORED_MARKER).is_file() for parent in path.absolute().parents):
                continue  # inside a vendored runtime (--vendor-runtime): never migrated, named or not
            info = path.stat()
            if not regular(path, info):
                continue
            if filetypes.detect_file(raw) is None:
                found.warnings.append(f"{raw}: not a supported file type; skipped")
                continue
            add(path, info)  # named explicitly: processed even where excluded or ignored (unless force_exclude)
            collect_leftovers(os.path.dirname(raw))
            continue
        top = path.absolute()
        ignores = _IgnoreStack()
        git_root = _git_root(top)
        tracked = _Tracked(top)
        if git_root is not None:
            for directory in reversed((top, *top.parents)):
                if directory == git_root or git_root in directory.parents:
                    if directory != top:
                        ignores.load(directory)
        for dirpath, dirnames, filenames in os.walk(top):
            current = Path(dirpath)
            ignores.load(current)
            keep = []
            for name in sorted(dirnames):
                sub = current / name
                if _skipped_dir(sub):
                    if name == VENDORED_PACKAGE and (sub / VENDORED_MARKER).is_file():
                        found.vendored.append(str(current))
                    continue
                if is_excluded(sub, True) or (ignores.ignored(sub, True) and not tracked.holds(sub)):
                    continue
                if sub.is_symlink():  # os.walk would not follow it either
                    not_followed(sub, "directory")
                    continue
                keep.append(name)
            dirnames[:] = keep if recursive else []
            for name in sorted(filenames):
                if is_temp_name(name):
                    found.leftovers.append(os.path.join(dirpath, name))
                    continue
                file = current / name
                known = filetypes.by_name(os.path.join(dirpath, name)) is not None
                if not known and not filetypes.may_be_script(name):
                    continue
                if is_excluded(file, False) or file in own:
                    continue
                if ignores.ignored(file, False) and not tracked.file(file):
                    continue
                info = walked(file, known)
                if info is None:
                    continue
                if not known and filetypes.by_shebang(filetypes.read_head(str(file)) or b"") is None:
                    continue
                add(Path(os.path.relpath(file)) if not Path(raw).is_absolute() else file, info)
        found.errors.extend(ignores.errors)
    return found


def project_files(root: str, exclude: list[str], config_root: Path, force_exclude: bool = False) -> list[str]:
    """The files of the project at ``root`` (:func:`npu_migrate.pipeline.config.project_root`),
    read for its facts: what ``npu-migrate ROOT`` would migrate. A root without a project
    marker (a file directly in ``/tmp`` or ``~/Downloads``, no repository or project file
    above it) is a project of its own files only: each of its subfolders is another
    project (:func:`~npu_migrate.pipeline.config.marked`), so they are not walked. Walking
    them gave the same facts but read the whole folder tree first (an editor's or a
    pre-commit's `npu-migrate /tmp/x.py` ran for over an hour)."""
    from npu_migrate.pipeline.config import marked

    return discover([root], exclude, config_root, force_exclude, recursive=marked(root)).files
