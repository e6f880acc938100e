"""The software stack a job needs on the node, and its versions: the Ascend driver, CANN,
torch and torch_npu (importable, and paired: torch_npu X.Y needs torch X.Y).

- driver: ``<ascend root>/driver/version.info`` (``Version=24.1.rc2``);
- CANN: ``ASCEND_HOME_PATH`` / ``ASCEND_TOOLKIT_HOME`` (set by CANN's ``set_env.sh``),
  else ``<ascend root>/ascend-toolkit/latest``; its version from
  ``*/ascend_<package>_install.info`` (``version=8.0.RC2``) or ``version.cfg``; the
  deployment-only ``nnae`` package counts as CANN too;
- torch / torch_npu: asked of the job's interpreter (``--python``, default the one
  running the preflight) in a child process, so that an ``import torch_npu`` that
  fails (``libhccl.so: cannot open shared object file`` without CANN) or crashes is a
  problem line here, not a crash of the preflight.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .context import Context

AREA = "stack"
PROBE_TIMEOUT_S = 180.0
_PROBE = """
import json, importlib.metadata as md
found = {}
for dist in ("torch", "torch-npu"):
    try:
        found[dist] = md.version(dist)
    except md.PackageNotFoundError:
        found[dist] = None
found["error"] = None
if found["torch-npu"]:
    try:
        import torch, torch_npu  # noqa: F401
        found["npus"] = torch.npu.device_count()
    except BaseException as exc:
        found["error"] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0]
print("NPU_PREFLIGHT_PROBE " + json.dumps(found))
"""
_VERSION_LINE = re.compile(r"^\s*(?:Version|version|toolkit_installed_version)\s*=\s*\[?([^\]\s]+)", re.MULTILINE)


def _version_in(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = _VERSION_LINE.search(text)
    return m.group(1).split(":")[-1] if m else None


def driver_version(ctx: Context) -> str | None:
    return _version_in(ctx.ascend_root / "driver" / "version.info")


def cann_home(ctx: Context) -> Path | None:
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        value = ctx.environ.get(name, "").strip()
        if value and Path(value).is_dir():
            return Path(value)
    for package in ("ascend-toolkit", "nnae"):  # the toolkit, or the deployment-only nnae package
        default = ctx.ascend_root / package / "latest"
        if default.is_dir():
            return default
    return None


def cann_version(home: Path) -> str | None:
    for info in sorted(home.glob("*/ascend_*_install.info")):
        version = _version_in(info)
        if version:
            return version
    return _version_in(home / "version.cfg")


def major_minor(version: str) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check(ctx: Context) -> None:
    driver = driver_version(ctx)
    ctx.found["driver"] = driver or "none"
    if driver is None:
        ctx.problem(AREA, f"no Ascend driver: {ctx.ascend_root / 'driver' / 'version.info'} is missing",
                    "install the NPU driver and firmware (or mount /usr/local/Ascend/driver into the container)")
    home = cann_home(ctx)
    version = cann_version(home) if home is not None else None
    ctx.found["CANN"] = version or ("found, version unknown" if home is not None else "none")
    if home is None:
        ctx.problem(AREA, "no CANN: ASCEND_HOME_PATH and ASCEND_TOOLKIT_HOME are unset and "
                          f"neither {ctx.ascend_root / 'ascend-toolkit' / 'latest'} nor "
                          f"{ctx.ascend_root / 'nnae' / 'latest'} exists",
                    "install the CANN toolkit and source its set_env.sh "
                    "(source /usr/local/Ascend/ascend-toolkit/set_env.sh)")
    _python_stack(ctx)


def _python_stack(ctx: Context) -> None:
    status, text = ctx.run_tool([ctx.python, "-c", _PROBE], timeout=PROBE_TIMEOUT_S)
    line = next((ln for ln in text.splitlines() if ln.startswith("NPU_PREFLIGHT_PROBE ")), None)
    try:
        found = json.loads(line.split(" ", 1)[1]) if line else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        last = text.strip().splitlines()[-1] if text.strip() else "no output"
        ctx.problem(AREA, f"{ctx.python} could not be asked for torch and torch_npu (exit {status}): {last}",
                    "point PYTHON (the launcher's interpreter) at the environment with torch and torch_npu")
        ctx.found.update({"torch": "unknown", "torch_npu": "unknown"})
        return
    torch, torch_npu, error = found.get("torch"), found.get("torch-npu"), found.get("error")
    ctx.found.update({"torch": torch or "none", "torch_npu": torch_npu or "none"})
    if torch is None:
        missing = "torch and torch_npu are" if torch_npu is None else "torch is"
        ctx.problem(AREA, f"{missing} not installed for {ctx.python}",
                    "pip install torch==X.Y.* (the CPU build) and the torch-npu of the same X.Y")
    elif torch_npu is None:
        ctx.problem(AREA, f"torch_npu is not installed for {ctx.python}",
                    "pip install torch-npu==X.Y.* matching torch's X.Y (with CANN installed)")
    elif not _paired(torch, torch_npu):
        failing = f"; import torch_npu fails: {error}" if error else ""
        ctx.problem(AREA, f"torch {torch} and torch_npu {torch_npu} do not pair (torch_npu X.Y needs torch X.Y)"
                          f"{failing}",
                    f"install the torch-npu release for torch {torch} (or the torch its X.Y names)")
    elif error:
        ctx.problem(AREA, f"import torch_npu fails: {error}",
                    "source CANN's set_env.sh before Python starts (libhccl.so), and pair torch with torch_npu")
    elif isinstance(found.get("npus"), int):
        ctx.found["torch_npu NPUs"] = str(found["npus"])
        if found["npus"] == 0:
            ctx.problem(AREA, "torch_npu imports but sees 0 NPUs (torch.npu.device_count() == 0)",
                        "check ASCEND_RT_VISIBLE_DEVICES / ASCEND_VISIBLE_DEVICES and the driver (npu-smi info)")


def _paired(torch: str, torch_npu: str) -> bool:
    """torch_npu X.Y is built for torch X.Y; a mismatch is one problem (whatever the import then says)."""
    a, b = major_minor(torch), major_minor(torch_npu)
    return a is not None and a == b
