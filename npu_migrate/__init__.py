"""npu-migrate: CUDA -> Ascend NPU source migration.

``__version__`` is the release's one version, shared with npu-runtime: the line
``__version__ = "X"`` of the runtime's ``__init__.py`` (``runtime/npu_runtime``, bundled
here as ``npu_migrate._runtime``). Both pyproject files read that line, and migrated
repositories are pinned to it (``npu-runtime==X``), so the tool, the runtime it was
released with and the pin cannot disagree. It is read as text: importing npu_migrate
does not import the runtime.
"""

import importlib.util as _util
import re as _re


def _release_version() -> str:
    spec = _util.find_spec(f"{__name__}._runtime")
    if spec is not None and spec.submodule_search_locations:
        init = f"{next(iter(spec.submodule_search_locations))}/__init__.py"
        try:
            with open(init, encoding="utf-8") as handle:
                found = _re.search(r'^__version__ = "([^"]+)"$', handle.read(), _re.MULTILINE)
        except OSError:
            found = None
        if found:
            return found.group(1)
    return "0+unknown"  # a broken install without its runtime copy (runtime_bundle says so)


__version__ = _release_version()
