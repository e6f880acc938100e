"""NPU916: RAPIDS (cuML, cuDF, cuGraph...): NVIDIA's GPU data-science libraries."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage


class Rapids(CudaOnlyPackage):
    id = "NPU916"
    impact = "blocking"
    name = "rapids"
    summary = "Report imports of RAPIDS libraries (cuml, cudf, cugraph, cuvs...), which run on NVIDIA GPUs only"
    label = "RAPIDS"
    packages = ("cuml", "cudf", "cugraph", "cuvs", "cuspatial", "cucim", "dask_cudf", "rmm", "pylibraft")
    problem = "RAPIDS libraries run on NVIDIA GPUs only (CUDA memory, CUDA kernels): the import fails on Ascend"
    import_suggestion = (
        "use the CPU library with the same API (scikit-learn for cuml, pandas for cudf, networkx for cugraph, "
        "faiss-cpu for cuvs), or torch ops on the npu device for the heavy part"
    )
    triggers = ("cuml", "cudf", "cugraph", "cuvs", "cuspatial", "cucim", "dask_cudf", "rmm", "pylibraft")
    rationale = """
RAPIDS is NVIDIA's GPU data-science stack: cuML (scikit-learn-like estimators),
cuDF (a pandas-like DataFrame), cuGraph, cuVS (vector search), cuSpatial, cuCIM,
and their memory manager RMM. Every one of them allocates CUDA memory and runs
CUDA kernels; none has an Ascend build, so the import fails there (dinov2's
`eval/log_regression.py` imports cuML's `LogisticRegression` at the top of the
file). Each import is reported with the CPU library of the same API; a guarded
import is reported as such, since its fallback is what runs on Ascend. Project
modules with these names are the project's own and not reported.
"""

    def is_target(self, qualified: str) -> bool:
        return super().is_target(qualified) and not self.ctx.facts.is_project_module(self.ctx.path, qualified)

    examples = (
        Example("from cuml.linear_model import LogisticRegression  # reported\n"),
        Example("from sklearn.linear_model import LogisticRegression\n"),
    )
