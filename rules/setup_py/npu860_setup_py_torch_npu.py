"""NPU860: add ``torch-npu`` to ``setup.py``'s requirements next to a pinned torch."""

from __future__ import annotations

import libcst as cst

from npu_migrate.deps import pairing
from npu_migrate.python.cst_util import with_string_value
from npu_migrate.python.rule import Example

from ._requirements import SetupRequirementsRule, appender


def _specifier(text: str) -> str:
    return str(pairing.parse(text).specifier)


def _name(text: str) -> str | None:
    requirement = pairing.parse(text)
    return pairing.name_of(requirement) if requirement else None


class SetupPyTorchNpu(SetupRequirementsRule):
    id = "NPU860"
    name = "setup-py-torch-npu"
    summary = ("Add `torch-npu==X.Y.*` after a torch pinned to X.Y in setup.py's extras_require for the NPU where a "
               "torch-npu release pairs with it; report it for install_requires, other pins with the nearest pairs")
    rationale = """
The setup.py counterpart of NPU850 (same decision, `npu_migrate/deps/pairing.py`):
torch-npu X.Y requires torch X.Y exactly, so where a literal requirement list
of `setup()` pins torch to one minor series and admits a torch that a torch-npu
release requires (`npu_migrate/tables/torch_npu_releases.py`), `"torch-npu==X.Y.*"` pairs with it.
It is added right after torch, in torch's quotes and the list's layout, only in an
extra named for the NPU (`extras_require={"npu": [...]}`); in `install_requires` and
other extras, which CPU machines install, it is reported with the line to add (NPU850
says why: a torch-npu next to torch makes `import torch` fail where CANN is missing). A list bound to a
module-level name (`REQUIRED = [...]`, `install_requires=REQUIRED`) is followed;
lists built at run time (read from requirements.txt) are not: that file is
migrated by NPU850 itself. Where torch is not pinned, the finding states the
pairing rule; where no torch-npu release pairs with the pin (`torch==2.3.0`,
`torch==2.15.0`), the finding names the nearest pairs that exist and nothing is added.

setup.py stays a Python file: every Python rule runs on it too, and
`# npu-migrate: ignore[NPU860]` works as on any Python line.
"""
    examples = (
        Example('from setuptools import setup\nsetup(name="x", extras_require={"npu": ["torch==2.1.0"]})\n',
                'from setuptools import setup\nsetup(name="x", extras_require={"npu": ["torch==2.1.0", "torch-npu==2.1.*"]})\n'),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['torch==2.1.0'])  # reported\n"),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['torch>=2.0'])  # reported\n"),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['torch==2.15.0'])  # reported\n"),
    )

    def check(self, lists) -> None:
        has_npu = any(_name(text) == pairing.TORCH_NPU for lst in lists for _, text in lst.items)
        torches = [(lst, element, text, pairing.minor_series(str(pairing.parse(text).specifier)))
                   for lst in lists for element, text in lst.items if _name(text) == pairing.TORCH]
        settled = has_npu or any(series and pairing.paired(_specifier(text)) for _, _, text, series in torches)
        for lst, element, text, series in torches:
            if series is None or series < pairing.OLDEST_PAIRED:
                if not settled:
                    self.report(element, f"`{text}` is not pinned to one minor release, so the torch-npu to add "
                                "cannot be chosen", pairing.PAIRING_RULE)
                continue
            exists = bool(pairing.paired(_specifier(text)))
            own = [t for _, t in lst.items if _name(t) == pairing.TORCH_NPU]
            if own:
                for other in own:
                    if not pairing.pairs_with(str(pairing.parse(other).specifier), series):
                        use = (f"use torch-npu{pairing.npu_specifier(series)}" if exists
                               else pairing.unpaired(text, _specifier(text), series)[1])
                        self.report(element, f"`{other}` does not pair with `{text}`", use)
                continue
            if not exists:
                self.report(element, *pairing.unpaired(text, _specifier(text), series))
                continue
            requirement = f"{pairing.TORCH_NPU}{pairing.npu_specifier(series)}"
            if not pairing.ascend_only(lst.where):
                self.report(element, *pairing.base_install(requirement, f"setup.py's {lst.where}", "requirements.txt"))
                continue
            self.replace(lst.node, _inserter(element, requirement), f"add `{requirement}` (pairs with `{text}`)",
                         needs_torch_npu=False, anchor=element)


def _inserter(torch: cst.Element, requirement: str):
    def insert(updated: cst.List | cst.Tuple) -> cst.List | cst.Tuple:
        elements = list(updated.elements)
        index = next(i for i, e in enumerate(elements) if e.value.deep_equals(torch.value))
        if index == len(elements) - 1:  # torch is last: appended in the list's layout
            return appender(requirement)(updated)
        current = elements[index]
        string = current.value if isinstance(current.value, cst.SimpleString) else cst.SimpleString(f'"{requirement}"')
        comma = current.comma
        if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            # torch's line comment stays on torch's line
            comma = comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(first_line=cst.TrailingWhitespace()))
        new = cst.Element(with_string_value(string, requirement), comma=comma)
        if isinstance(current.comma, cst.MaybeSentinel):  # torch was last, without a comma
            before = elements[index - 1].comma if index else None
            comma = before if isinstance(before, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            elements[index] = current.with_changes(comma=comma)
        elements.insert(index + 1, new)
        return updated.with_changes(elements=elements)

    return insert
