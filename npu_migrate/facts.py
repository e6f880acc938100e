"""Facts about the whole project that single-file rules need.

Some decisions cannot be made one file at a time: the epoch loop that should
call ``sampler.set_epoch`` often lives in another file than the sampler. The CLI
gathers these facts with a cheap text scan of every discovered file before the
per-file work starts, and they are part of the cache key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_SET_EPOCH = re.compile(rb"\.set_epoch\s*\(")
#: ``DataParallel(`` as a call, not ``DistributedDataParallel(`` or ``isinstance(m, DataParallel)``
_DATA_PARALLEL_CALL = re.compile(rb"\bDataParallel\s*\(")


@dataclass(frozen=True)
class ProjectFacts:
    #: Some file of the project already calls ``<something>.set_epoch(...)``.
    calls_set_epoch: bool = False
    #: Some file of the project builds an ``nn.DataParallel`` (NPU801 then makes
    #: ``isinstance(m, nn.DataParallel)`` checks in every file accept DDP too).
    constructs_data_parallel: bool = False

    @classmethod
    def scan(cls, sources: Iterable[bytes]) -> ProjectFacts:
        """Facts from every source (all of ``sources`` is consumed, even once a fact is known)."""
        calls_set_epoch = constructs_data_parallel = False
        for data in sources:
            calls_set_epoch = calls_set_epoch or _SET_EPOCH.search(data) is not None
            constructs_data_parallel = constructs_data_parallel or _DATA_PARALLEL_CALL.search(data) is not None
        return cls(calls_set_epoch=calls_set_epoch, constructs_data_parallel=constructs_data_parallel)

    def key(self) -> str:
        return f"set_epoch={int(self.calls_set_epoch)},data_parallel={int(self.constructs_data_parallel)}"
