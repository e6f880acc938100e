"""Build, cache and load the emulated NPU's C++ extension.

The extension is compiled with ``torch.utils.cpp_extension`` into a cache
directory keyed by a hash of its sources, the compile flags, the torch version
and the Python version, so a second run on the same machine only loads the
shared library. The cache root is ``$NPU_MIGRATE_EMULATOR_CACHE`` or
``~/.cache/npu-migrate/emulator``.

What the build costs (docs/emulator.md has the figures): parsing torch's headers,
not optimising our code (``-O0`` compiles no faster than ``-O1``). So both parts
(``emu_device.cpp``, ``emu_autocast.cpp``) are compiled as one translation unit
(``npu_emu.cpp``), which parses the headers once. While it builds, a line on
stderr says so, with the elapsed time on a terminal.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from pathlib import Path

EXT_NAME = "npu_migrate_emu"
CSRC_DIR = Path(__file__).resolve().parent / "csrc"
#: What is compiled: one translation unit that includes the parts.
UNIT = "npu_emu.cpp"
#: Everything the build reads from csrc/ (the cache key hashes all of it).
SOURCES = ("npu_emu.cpp", "emu_device.cpp", "emu_autocast.cpp")
# Lean flags: the build must stay quick on 2-core CI machines.
CFLAGS = ("-O1", "-g0")
_COMPLETE_MARKER = ".npu_migrate_complete"

_loaded_path: str | None = None


class BuildError(RuntimeError):
    """The emulator extension could not be compiled."""


def cache_root() -> Path:
    env = os.environ.get("NPU_MIGRATE_EMULATOR_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "npu-migrate" / "emulator"


def torch_version() -> str:
    """The version of the torch the emulated processes import, without importing it in
    this one when not yet imported: ``npu-migrate emulate`` only needs it for the cache
    key, and importing torch there cost each run seconds of CPU before its children
    imported torch again. The installed distribution's version is ``torch.__version__``
    (both carry the local tag, e.g. ``2.13.0+cpu``); where no distribution metadata
    is found (torch from a source tree on the path) torch is imported after all."""
    torch = sys.modules.get("torch")
    if torch is None:
        import importlib.metadata

        try:
            return importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            import torch
    return torch.__version__


def cache_key() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode())
        h.update((CSRC_DIR / name).read_bytes())
    h.update(" ".join(CFLAGS).encode())
    h.update(torch_version().encode())
    h.update(sys.version.split()[0].encode())
    h.update(platform.machine().encode())
    return h.hexdigest()[:20]


def build_dir() -> Path:
    return cache_root() / cache_key()


def library_path() -> Path:
    return build_dir() / f"{EXT_NAME}.so"


def is_built() -> bool:
    d = build_dir()
    return (d / _COMPLETE_MARKER).exists() and (d / f"{EXT_NAME}.so").exists()


class _Announce:
    """Says on stderr that the build is running (it takes a while the first time),
    with a live elapsed-time counter on a terminal, and how long it took."""

    def __init__(self, directory: Path, quiet: bool) -> None:
        self.directory, self.quiet = directory, quiet
        self._progress = None

    def __enter__(self) -> None:
        self.start = time.monotonic()
        if self.quiet:
            return
        message = "building the emulated NPU (first use; cached afterwards)"
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=Console(stderr=True), transient=True)
            self._progress.start()
            self._progress.add_task(message, total=None)
        else:
            print(f"npu-migrate emulate: {message} ...", file=sys.stderr, flush=True)

    def __exit__(self, kind, value, traceback) -> None:
        if self._progress is not None:
            self._progress.stop()
        if not self.quiet and kind is None:
            print(f"npu-migrate emulate: built the emulated NPU in {time.monotonic() - self.start:.0f} s "
                  f"({self.directory})", file=sys.stderr, flush=True)


def build(verbose: bool = False, quiet: bool = False) -> Path:
    """Compile the extension into the cache (no-op when already cached); return the .so path.
    Unless ``quiet``, stderr says that it is building and how long it took."""
    if is_built():
        return library_path()
    try:
        from torch.utils import cpp_extension
    except ImportError as exc:  # pragma: no cover - torch is a hard requirement here
        raise BuildError(
            "the emulator needs torch: pip install 'npu-migrate[emulate]'"
        ) from exc
    d = build_dir()
    d.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        # cpp_extension serialises concurrent builds of one directory with a lock file.
        with _Announce(d, quiet or verbose):
            path = cpp_extension.load(
                name=EXT_NAME,
                sources=[str(CSRC_DIR / UNIT)],
                build_directory=str(d),
                extra_cflags=list(CFLAGS),
                is_python_module=False,
                verbose=verbose,
            )
    except Exception as exc:
        hint = ""
        if "ninja" in str(exc).lower():
            hint = " (the build needs ninja: pip install 'npu-migrate[emulate]')"
        raise BuildError(
            f"building the emulated NPU extension failed{hint}: {exc}"
        ) from exc
    (d / _COMPLETE_MARKER).write_text(f"built in {time.monotonic() - start:.1f}s\n")
    global _loaded_path
    _loaded_path = str(path)
    return Path(path)


def load() -> str:
    """Load the extension into this process, building it first if needed."""
    global _loaded_path
    if _loaded_path is not None:
        return _loaded_path
    import torch

    if not is_built():
        build()
        if _loaded_path is not None:  # cpp_extension.load already loaded it
            return _loaded_path
    path = str(library_path())
    torch.ops.load_library(path)
    _loaded_path = path
    return path
