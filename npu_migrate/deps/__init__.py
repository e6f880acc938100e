"""The dependency-file front end: ``requirements*.txt`` and constraints files,
``pyproject.toml`` (``[project]`` dependencies, optional dependencies and
``[dependency-groups]``), ``setup.cfg`` (``install_requires``, ``extras_require``)
and conda ``environment.yml``.

Each format has a reader (``requirements_txt``, ``pyproject``, ``setup_cfg``,
``conda``) that finds the lists of requirements with their byte positions and
knows how to add one more entry in the list's own style; the rules
(``rules/deps/``) see every format through :mod:`npu_migrate.deps.model` and decide
with :mod:`npu_migrate.deps.pairing` (requirements parsed with ``packaging``).
``setup.py`` is Python: its literal ``install_requires`` is read by the Python
rules in ``rules/setup_py/`` with the same decisions.

Entry point: :func:`npu_migrate.deps.engine.migrate`.
"""
