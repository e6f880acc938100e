"""Package layout glue.

The design card puts the rule modules in a top-level ``rules/`` directory and the
runtime shim in ``runtime/npu_runtime/``. In an installed wheel they must only appear under
npu-migrate's own import names, so ``rules/`` becomes ``npu_migrate.rules`` and
``runtime/npu_runtime/`` becomes ``npu_runtime``. Everything else lives in pyproject.toml.
"""

from setuptools import find_packages, setup


def _mapped(prefix: str, directory: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(directory)]


setup(
    packages=find_packages(include=["npu_migrate", "npu_migrate.*"])
    + _mapped("npu_migrate.rules", "rules")
    + _mapped("npu_runtime", "runtime/npu_runtime"),
)
