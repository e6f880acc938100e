"""NPU964: ``vllm==X.Y.Z`` gets ``vllm-ascend==X.Y.Z.*`` next to it."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from npu_migrate.deps import pairing
from npu_migrate.deps.rule import DepsRule, Example
from npu_migrate.rules.cluster import _vllm


def _exact(specifier: str) -> str | None:
    """``X.Y.Z`` for ``==X.Y.Z`` (the only pin a vllm-ascend release can be paired with)."""
    try:
        specs = list(SpecifierSet(specifier))
    except ValueError:
        return None
    if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith("*"):
        return specs[0].version
    return None


class VllmAscendRequirement(DepsRule):
    id = "NPU964"
    name = "vllm-ascend-requirement"
    impact = "blocking"
    summary = "Add `vllm-ascend==X.Y.Z.*` next to `vllm==X.Y.Z` in Ascend-only dependency lists where a release pairs with it; report the rest"
    triggers = (b"vllm",)
    rationale = f"""
vLLM runs on Ascend through its platform plugin vllm-ascend, released at the
same version as the vLLM it supports (vllm-ascend's versioning policy: vllm-ascend
vX.Y.Z pairs with vLLM vX.Y.Z; post releases such as 0.7.3.post1 fix the plugin
only). Where a requirement pins `vllm==X.Y.Z` and PyPI has a vllm-ascend X.Y.Z
({", ".join(_vllm.PAIRED)}, checked with `pip index versions vllm-ascend`),
`vllm-ascend==X.Y.Z.*` is added after it, in the list's own style, in a list that
only Ascend machines install (an `npu` extra, a `requirements-npu.txt`: the same
decision as NPU850's torch-npu). Elsewhere it is reported with the line to add:
vllm-ascend requires torch-npu and its own torch, so in a file every machine
installs it would break `import torch` where CANN is missing, and its torch pin
may clash with the file's (held-out round 14: smollm's `torch==2.7.0` beside
`vllm==0.9.1`, whose vllm-ascend wants torch 2.5.1). Any other vllm requirement (a range, no pin, a
version without a plugin release) is reported with the releases that exist. A
file that already names vllm-ascend is left alone. NPU851 still reports vllm
itself (it needs CANN's vllm-ascend image or build).
"""
    examples = (
        Example("vllm==0.9.1  # reported: every machine installs requirements.txt\n"),
        Example("vllm>=0.8  # reported\n"),
        Example("torch==2.5.1\nnumpy\n"),
    )

    def check(self, document) -> None:
        entries = [e for lst in document.lists for e in lst.entries if e.name and not e.conda]
        if any(canonicalize_name(e.name) == "vllm-ascend" for e in entries):
            return
        for lst in document.lists:
            for entry in lst.entries:
                if entry.conda or not entry.name or canonicalize_name(entry.name) != "vllm":
                    continue
                version = _exact(entry.specifier)
                wanted = _vllm.pairing(version) if version else None
                if wanted is None:
                    pinned = f"`{entry.shown}`"
                    why = (f"no vllm-ascend release pairs with vllm {version}" if version
                           else "vllm is not pinned to one version, so the vllm-ascend to pair cannot be chosen")
                    self.report_entry(entry, f"{pinned} needs the vllm-ascend plugin on Ascend; {why}",
                                      f"pin vllm to a version with a plugin release and add vllm-ascend at the same "
                                      f"version: {_vllm.ROUTE}")
                    continue
                if not pairing.ascend_only(lst.where, self.file.path):
                    # vllm-ascend requires torch-npu (and its own torch): on a machine without CANN a
                    # torch-npu beside torch makes `import torch` fail, and its torch pin may clash with
                    # the file's (smollm's evaluation requirements pin torch==2.7.0 beside vllm==0.9.1)
                    self.report_entry(entry, f"`{entry.shown}` needs `{wanted}` on Ascend, but not in the {lst.where} "
                                      "that every machine installs: vllm-ascend brings torch-npu (and its own torch "
                                      "pin), which breaks `import torch` where CANN is missing",
                                      f"add `{wanted}` to the Ascend install only (an `npu` extra, a requirements-npu.txt "
                                      f"that includes this file), or run in the vllm-ascend image; {_vllm.ROUTE}")
                    continue
                edit = lst.add(entry, wanted) if lst.add is not None and document.no_additions is None else None
                if edit is None or isinstance(edit, str):
                    reason = document.no_additions or edit or f"this {lst.where} cannot take one more entry safely"
                    self.report_entry(entry, f"`{entry.shown}` needs `{wanted}` beside it, but {reason}",
                                      f"add `{lst.written(wanted) if lst.written else wanted}`")
                    continue
                start, end, new = edit
                self.edit(start, end, new, f"add `{wanted}`: vllm-ascend {version} is the Ascend plugin of vllm {version}",
                          anchor=entry.start)
