"""``[tool.npu-migrate]`` in the nearest ``pyproject.toml``.

The nearest file that has a ``[tool.npu-migrate]`` table wins, searching upward
from the common parent of the paths given on the command line (as ruff does).
Globs in ``exclude`` and ``per-file-ignores`` are relative to that file's
directory. How flags combine with these values: ``npu_migrate/cli/options.py``.

    [tool.npu-migrate]
    select = ["NPU"]
    ignore = ["NPU701"]
    exclude = ["third_party/**", "legacy_*.py"]
    per-file-ignores = { "tests/**" = ["NPU9"] }

    [tool.npu-migrate.launch]          # read by `npu-migrate launch` (npu_migrate/launch/settings.py)
    entry = "train.py"
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from npu_migrate.pipeline import limits

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LISTS = {"select", "extend-select", "ignore", "extend-ignore", "exclude", "extend-exclude", "entry-points"}
SWITCHES = {"force-exclude", "fail-on-findings"}
KEYS = {*LISTS, *SWITCHES, "per-file-ignores", "launch"}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    root: Path
    path: Path | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    #: Training entry points the user names (globs relative to the root): NPU701 and
    #: `npu-migrate launch` treat them as entry points (npu_migrate/pipeline/entry_points.py).
    entry_points: list[str] = field(default_factory=list)
    force_exclude: bool = False
    fail_on_findings: bool = False
    # [tool.npu-migrate.launch], validated by the launch subsystem that owns its keys.
    launch: dict = field(default_factory=dict)


#: What makes a directory a project's root: a repository, a package's metadata, or an
#: application's own dependency file (a sub-application with its own
#: ``requirements.txt`` is a project of its own: its facts, its declaration of
#: npu-runtime, its vendored runtime).
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "environment.yml")


def project_root(path: str | os.PathLike, cache: dict[str, str] | None = None) -> str:
    """The project a file belongs to: the nearest directory at or above it that holds
    one of :data:`PROJECT_MARKERS`; the file's own directory when none does. Found from
    the file, never from the working directory, so that every way of naming a file
    (itself, its folder, the repository root, a pre-commit list, ``--stdin-filename``,
    from any directory) gives the same project."""
    _cache = cache if cache is not None else {}
    start = os.path.abspath(path)
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    seen = []
    found = None
    current = directory
    while True:
        if current in _cache:
            found = _cache[current]
            break
        seen.append(current)
        if marked(current):
            found = current
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if found is None:
        found = directory
        seen = [directory]  # without a marker above, each directory stands alone
    for entry in seen:
        _cache[entry] = found
    return found


def marked(directory: str | os.PathLike) -> bool:
    """``directory`` holds one of :data:`PROJECT_MARKERS`. A :func:`project_root` that is
    not marked is the fallback for a file with no marker above it (a file directly in
    ``/tmp``): that project is the directory's own files, none of its subfolders' (each
    of them is a project of its own)."""
    return any(os.path.exists(os.path.join(directory, name)) for name in PROJECT_MARKERS)


def _common_parent(paths: list[str]) -> Path:
    resolved = [Path(p).absolute() for p in paths] or [Path.cwd()]
    dirs = [p if p.is_dir() else p.parent for p in resolved]
    return Path(os.path.commonpath([str(d) for d in dirs]))


def _string_list(value, key: str, path: Path) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.npu-migrate] {key} must be a list of strings")
    return value


def load_config(paths: list[str], explicit: str | None = None, isolated: bool = False) -> Config:
    """The ``[tool.npu-migrate]`` table of the nearest pyproject.toml above ``paths``
    (or of ``explicit``); the defaults with ``isolated`` (``--isolated``)."""
    if isolated:
        return Config(root=Path.cwd())
    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        start = _common_parent(paths)
        candidates = [d / "pyproject.toml" for d in (start, *start.parents)]
    for candidate in candidates:
        if not candidate.is_file():
            if explicit is not None:
                raise ConfigError(f"{candidate}: no such config file")
            continue
        try:
            text = candidate.read_text(encoding="utf-8")
            limits.check(text, "toml")  # size and nesting first: tomllib recurses
            data = tomllib.loads(text)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{candidate}: cannot read config: {exc}") from None
        except limits.LimitError as exc:
            raise ConfigError(f"{candidate}:{exc.line}: cannot read config: {exc.message}") from None
        except (RecursionError, MemoryError):
            raise ConfigError(f"{candidate}: cannot read config: too deeply nested or too large") from None
        table = data.get("tool", {}).get("npu-migrate")
        if table is None:
            if explicit is not None:
                return Config(root=candidate.parent.absolute(), path=candidate)
            continue
        return _parse(table, candidate)
    # no configuration: the project of the paths (never the working directory)
    return Config(root=Path(project_root(start)) if explicit is None else Path.cwd())


def _parse(table: dict, path: Path) -> Config:
    unknown = set(table) - KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.npu-migrate]: {', '.join(sorted(unknown))}")
    config = Config(root=path.parent.absolute(), path=path)
    for key in LISTS & set(table):
        setattr(config, key.replace("-", "_"), _string_list(table[key], key, path))
    for key in SWITCHES & set(table):
        if not isinstance(table[key], bool):
            raise ConfigError(f"{path}: [tool.npu-migrate] {key} must be true or false")
        setattr(config, key.replace("-", "_"), table[key])
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: [tool.npu-migrate] per-file-ignores must be a table of glob = [codes]")
    config.per_file_ignores = {k: _string_list(v, f"per-file-ignores.{k}", path) for k, v in per_file.items()}
    launch = table.get("launch", {})
    if not isinstance(launch, dict):
        raise ConfigError(f"{path}: [tool.npu-migrate] launch must be a table ([tool.npu-migrate.launch])")
    config.launch = launch
    return config
