"""Shared by NPU808 (CUDA packages) and NPU812 (npu-runtime next to torch): the words
of a ``pip install`` command and the distribution a requirement word names."""

from __future__ import annotations

import re

from npu_migrate.shell import syntax

#: pip options whose next word is a value, not a requirement.
PIP_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                     "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
                     "--python-version", "--platform", "--config-settings", "-C", "--global-option", "--src"}
_WHEEL = re.compile(r"([A-Za-z0-9_.]+)-\d[^-/]*(?:-[^-/]+){2,3}\.whl$")


def pip_words(words: list[syntax.Arg]) -> list[syntax.Arg] | None:
    """The words after ``pip install`` (``pip3``, ``python -m pip``, ``uv pip``), or None."""
    for index, word in enumerate(words[:-1]):
        name = syntax.program(word)
        if name == "pip" and words[index + 1].text == "install":
            return words[index + 2 :]
        if name == "python" and index + 3 < len(words) and words[index + 1].text == "-m" \
                and words[index + 2].text == "pip" and words[index + 3].text == "install":
            return words[index + 4 :]
    return None


def distribution(text: str) -> tuple[str, str] | None:
    """(name, version spec) of a requirement word, or of a wheel's file name."""
    from packaging.requirements import InvalidRequirement, Requirement

    wheel = _WHEEL.search(text.split("#", 1)[0])
    if wheel is not None:
        return wheel.group(1), text
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    return requirement.name, str(requirement.specifier)
