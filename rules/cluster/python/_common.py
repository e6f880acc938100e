"""Shared by the cluster-stack findings for CUDA-only libraries: a package whose
top-level name a project may also use for a module of its own (``rotary_emb``) is
left alone where the project has that module."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage


class ExternalCudaOnly(CudaOnlyPackage):
    """:class:`CudaOnlyPackage` that skips imports the project itself can satisfy."""

    def is_target(self, qualified: str) -> bool:
        return super().is_target(qualified) and not self.ctx.facts.is_project_module(self.ctx.path, qualified)
