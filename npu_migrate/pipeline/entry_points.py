"""Which Python files are training entry points, and which are library modules.

* An **entry point the user names** (``--entry FILE``, ``[tool.npu-migrate]
  entry-points = ["main.py", "tools/*.py"]``, globs relative to the configuration's
  directory) always gets ``npu_runtime.install()`` from NPU701 when it is migrated for
  the NPU, even when its training happens in imported modules (ConvNeXt's, DeiT's and
  MAE's ``main.py``), and ``npu-migrate launch`` uses the same names.
* A **library module** is a file inside a package (its directory has an
  ``__init__.py``), or a file that another file of the run imports (the project's
  own import graph: ConvNeXt's ``engine.py``, imported by ``main.py`` as ``from
  engine import train_one_epoch``; see ``ProjectFacts.imported_files``), that is not
  a named entry point. A script that is imported *and* has an
  ``if __name__ == "__main__":`` block (DeiT's ``main.py``, imported by
  ``run_with_submitit.py``) is treated as a library module with a demo block: the
  import and the ``install()`` call go inside the block, which is where a script
  run as ``python main.py`` calls them anyway; name it with ``--entry`` to get
  the top-level import. Importing it must keep working
  where torch_npu and npu_runtime are not installed: NPU701 never gives it a
  top-level ``import npu_runtime`` (a ``__main__`` demo block gets the import inside
  the block). (NPU100's ``import torch_npu`` is written guarded in every file, library
  code or not: npu_migrate/python/imports.py.)
"""

from __future__ import annotations

import fnmatch
import os

from npu_migrate.pipeline.facts import ProjectFacts


def is_named_entry(path: str, facts: ProjectFacts) -> bool:
    absolute = os.path.abspath(path)
    return any(absolute == pattern or fnmatch.fnmatchcase(absolute, pattern) for pattern in facts.entry_points)


def is_library(path: str, facts: ProjectFacts) -> bool:
    """A module of a package of the run (its directory holds an ``__init__.py`` that
    the run sees), or a file that another file of the run imports; not
    ``__main__.py``, not named as an entry point."""
    absolute = os.path.abspath(path)
    directory = os.path.dirname(absolute)
    return ((directory in facts.package_dirs or absolute in facts.imported_files)
            and os.path.basename(path) != "__main__.py" and not is_named_entry(path, facts))
