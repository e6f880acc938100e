"""Megatron-LM on Ascend: how MindSpeed is installed and which of its branches pairs
with which Megatron-LM release (plain data, shared by the dependency-file and
setup.py rules NPU971/NPU972).

Sources (Ascend/MindSpeed, read at 028de58c, 2026-07-21, every branch's own README):

* MindSpeed is installed from source only: README "使用源码安装" (`pip install -e
  MindSpeed` after cloning), docs/zh/user-guide/install_guide.md (`git clone
  https://gitcode.com/Ascend/MindSpeed.git`, `git checkout <branch>`, `pip install -e
  MindSpeed`). Its setup.py reads requirements.txt; nothing else installs it.
* PyPI's `mindspeed` is not MindSpeed: `pip download --no-deps mindspeed` (2026-11-28)
  fetches `mindspeed-0.0.1.dev1.tar.gz`, whose setup.py raises "This project is not
  functional and is a placeholder form HUAWEI Ascend". So no requirement line can
  declare MindSpeed from an index, and a git URL to gitcode.com could not be checked
  from here: the rules report, they never write a line.
* The pairs: each branch's README names the Megatron-LM ref to check out next to it
  (`git checkout core_r0.8.0`, `git checkout core_v0.12.1`) and, from 2.1.0 on, a
  version table ("Mcore版本"). Only branches whose README names one Megatron release
  are listed; for the commercial ("商用") series the newest branch of the series
  (26.1.0_core_r0.12.1 for Megatron core 0.12.1, the branch master's README also
  names).
"""

from __future__ import annotations

import re

REPOSITORY = "https://gitcode.com/Ascend/MindSpeed.git"
PLACEHOLDER = "PyPI's `mindspeed` is a 0.0.1.dev1 placeholder that refuses to install"

#: megatron-core version -> (MindSpeed branch, the Megatron-LM ref its README checks out)
BRANCHES: dict[str, tuple[str, str]] = {
    "0.6.0": ("1.0.0_core_r0.6.0", "core_r0.6.0"),
    "0.7.0": ("1.0.0_core_r0.7.0", "core_r0.7.0"),
    "0.8.0": ("2.1.0_core_r0.8.0", "core_r0.8.0"),
    "0.9.0": ("core_r0.9.0", "core_r0.9.0"),
    "0.10.0": ("core_r0.10.0", "core_r0.10.0"),
    "0.12.1": ("26.1.0_core_r0.12.1", "core_v0.12.1"),
    "0.15.3": ("core_r0.15.3", "v0.15.3"),
    "0.16.0": ("core_r0.16.0", "core_r0.16.0"),
}

#: PEP 503 names under which Megatron-LM is declared (PyPI serves megatron-core; megatron-lm
#: appears as a git URL's name)
NAMES = ("megatron-core", "megatron-lm")

_REF = re.compile(r"@(?P<ref>[A-Za-z0-9_.\-]+)(?:#.*)?$")


def commands(branch: str) -> str:
    return f"`git clone {REPOSITORY} && git -C MindSpeed checkout {branch} && pip install -e MindSpeed`"


def table() -> str:
    return "; ".join(f"megatron-core {version}: branch `{branch}` (Megatron-LM `{ref}`)"
                     for version, (branch, ref) in BRANCHES.items())


def version_of(specifier: str, url: str | None) -> str | None:
    """The one megatron-core release a requirement names: ``==X.Y.Z``, or a git URL whose
    ref is the Megatron-LM ref of a listed pair (``@core_v0.12.1``); else None."""
    if url:
        match = _REF.search(url)
        ref = match.group("ref") if match else None
        return next((version for version, (_, known) in BRANCHES.items() if known == ref), None)
    text = specifier.strip()
    if re.fullmatch(r"===?\s*\d+(?:\.\d+)*", text):
        version = text.lstrip("=").strip()
        parts = version.split(".")
        return ".".join((parts + ["0", "0"])[:3]) if len(parts) <= 3 else version
    return None


def advice(shown: str, specifier: str, url: str | None) -> tuple[str, str]:
    """The finding's message and suggestion for a Megatron-LM requirement written ``shown``."""
    version = version_of(specifier, url)
    pair = BRANCHES.get(version) if version else None
    message = (f"`{shown}`: Megatron-LM runs on Ascend through MindSpeed, which no package index serves "
               f"({PLACEHOLDER}), so no requirement line is added")
    if pair is not None:
        branch, ref = pair
        return message, (f"install MindSpeed from source at branch `{branch}`, which its README pairs with "
                         f"Megatron-LM `{ref}` (megatron-core {version}): {commands(branch)}; then "
                         "`import mindspeed.megatron_adaptor` after `import torch` in the entry script (NPU966)")
    why = (f"no MindSpeed branch names megatron-core {version}" if version
           else "the requirement names no single megatron-core release")
    return message, (f"{why}; pin one that a MindSpeed branch pairs with and install that branch from source "
                     f"({commands('<branch>')}): {table()}")
