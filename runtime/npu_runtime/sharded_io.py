"""Loading a ``sharded=True`` checkpoint without running code from it.

``torch.distributed.checkpoint`` reads its ``.metadata`` with ``pickle.load`` and its
non-tensor values with ``torch.load(weights_only=False)``: a planted checkpoint would run
arbitrary code. The runtime loads sharded checkpoints only from files and directories
this user owns and nobody else can write (``checkpoint.verify_dir``), and on top of that
reads them with

- :class:`TrustedReader`: ``.metadata`` through an unpickler that resolves only the
  classes DCP's metadata is made of (anything else: CheckpointError, nothing executed),
  and every storage file it names must be one the manifest lists;
- :class:`WeightsOnlyPlanner`: non-tensor values with ``torch.load(weights_only=True)``.

Saving goes through :func:`writer`: DCP's own file system opens every file with
``open(path, "wb")``, which follows a symlink; in a checkpoint directory others can
write to, a save's temporary directory can be swapped for one holding links (to
``~/.bashrc``), and the shards would be written through them. Every file is created
with ``O_CREAT|O_EXCL|O_NOFOLLOW`` instead: a planted name is an error, never a
file written through.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Collection
from typing import Any

from . import safeio
from .errors import CheckpointError

METADATA = ".metadata"
METADATA_MAX = 256 << 20

_PICKLE_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
                  ImportError, RecursionError, MemoryError, UnicodeDecodeError, OverflowError)


def _allowed() -> dict[tuple[str, str], Any]:
    import pathlib

    import torch
    from torch.distributed.checkpoint import filesystem, metadata

    allowed: dict[tuple[str, str], Any] = {}
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING"):
        if hasattr(metadata, name):
            allowed[("torch.distributed.checkpoint.metadata", name)] = getattr(metadata, name)
    allowed[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = filesystem._StorageInfo
    allowed[("torch", "Size")] = torch.Size
    for name in dir(torch):
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            allowed[("torch", name)] = value
    allowed[("torch.serialization", "_get_layout")] = torch.serialization._get_layout
    for name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"):
        allowed[("pathlib", name)] = getattr(pathlib, name)
    import collections

    allowed[("collections", "OrderedDict")] = collections.OrderedDict
    return allowed


class _MetadataUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, shown: str) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = _allowed()
        self._shown = shown

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise CheckpointError(f"{self._shown}: refers to {module}.{name}, which sharded checkpoint metadata "
                                  "never holds (refused, nothing was executed)") from None

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointError(f"{self._shown}: persistent ids are not part of checkpoint metadata (refused)")


def load_metadata(directory: str, allowed_files: Collection[str]) -> Any:
    """The DCP ``Metadata`` of ``directory`` (its ``sharded/`` folder), read safely."""
    from torch.distributed.checkpoint.metadata import Metadata

    shown = os.path.join(directory, METADATA)
    dfd = safeio.open_dir(directory)
    try:
        data = safeio.read_small(dfd, METADATA, shown=shown, max_size=METADATA_MAX)
    finally:
        os.close(dfd)
    try:
        meta = _MetadataUnpickler(data, shown).load()
    except CheckpointError:
        raise
    except _PICKLE_ERRORS as exc:
        raise CheckpointError(f"{shown}: unreadable sharded metadata ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, Metadata):
        raise CheckpointError(f"{shown}: not sharded checkpoint metadata ({type(meta).__name__})")
    storage = getattr(meta, "storage_data", None)
    if not isinstance(storage, dict):
        raise CheckpointError(f"{shown}: no storage table")
    for info in storage.values():
        rel = getattr(info, "relative_path", None)
        if not isinstance(rel, str) or rel not in allowed_files:
            raise CheckpointError(f"{shown}: names storage file {rel!r}, which the manifest does not list")
        if getattr(info, "transform_descriptors", None):
            raise CheckpointError(f"{shown}: storage transforms are not supported (refused)")
    return meta


def reader(directory: str, allowed_files: Collection[str]) -> Any:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class TrustedReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("rank") is not None:
                raise CheckpointError(f"{directory}: per-rank sharded metadata is not supported")
            meta = load_metadata(directory, allowed_files)
            if getattr(meta, "storage_meta", None) is None:
                meta.storage_meta = StorageMeta()
            meta.storage_meta.load_id = self.load_id
            return meta

    return TrustedReader(directory)


def writer(directory: str) -> Any:
    """DCP's FileSystemWriter for ``directory`` that never writes through a planted name."""
    from contextlib import contextmanager
    from pathlib import Path

    from torch.distributed.checkpoint import FileSystemWriter
    from torch.distributed.checkpoint.filesystem import FileSystem

    class NoFollowFileSystem(FileSystem):
        @contextmanager
        def create_stream(self, path: Any, mode: str) -> Any:
            if "w" not in mode:
                with super().create_stream(path, mode) as stream:
                    yield stream
                return
            try:
                fd = safeio.create_exclusive(os.fspath(path))
            except OSError as exc:
                raise CheckpointError(f"{path}: cannot create ({exc.strerror or exc}); a file or link someone "
                                      "planted is never written through") from None
            with os.fdopen(fd, mode) as stream:
                yield stream

        def mkdir(self, path: Any) -> None:
            Path(path).mkdir(parents=False, exist_ok=True)  # the save made it; never through new parents

    class NoFollowWriter(FileSystemWriter):
        def __init__(self, path: str) -> None:
            super().__init__(path)
            self.fs = NoFollowFileSystem()

    return NoFollowWriter(directory)


def planner() -> Any:
    import torch
    from torch.distributed.checkpoint import DefaultLoadPlanner
    from torch.distributed.checkpoint._traverse import set_element

    class WeightsOnlyPlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            obj = torch.load(value, weights_only=True)
            if self.flatten_state_dict:
                set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
            else:
                self.state_dict[read_item.dest_index.fqn] = obj

    return WeightsOnlyPlanner()
