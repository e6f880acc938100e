"""Package layout glue.

The design card puts the rule modules in a top-level ``rules/`` directory. In an
installed wheel they must only appear under npu-migrate's own import name, so ``rules/``
becomes ``npu_migrate.rules``. The runtime (``runtime/``) is a distribution of its own
(``runtime/pyproject.toml``, npu-runtime); npu-migrate's wheel carries a copy of it as
``npu_migrate._runtime`` (vendoring, the version pin, the preflight). Everything else lives in pyproject.toml.
"""

from setuptools import find_packages, setup


def _mapped(prefix: str, directory: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(directory)]


setup(
    packages=find_packages(include=["npu_migrate", "npu_migrate.*"])
    + _mapped("npu_migrate.rules", "rules")
    + _mapped("npu_migrate._runtime", "runtime/npu_runtime"),
)
