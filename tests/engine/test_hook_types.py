"""The pre-commit hooks hand npu-migrate every file type it migrates: each
``types_or`` entry is a tag of pre-commit's classifier (identify), and every
supported file has one of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from identify import identify

from npu_migrate.pipeline import filetypes

HOOKS = yaml.safe_load((Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text())


@pytest.mark.parametrize("hook", HOOKS, ids=[h["id"] for h in HOOKS])
def test_types_or_are_identify_tags(hook):
    assert set(hook["types_or"]) <= identify.ALL_TAGS


@pytest.mark.parametrize(
    "name",
    ["train.py", "conf.yaml", "conf.yml", "ds_config.json", "settings.toml", "pyproject.toml",
     "environment.yml", "demo.ipynb"],
)
def test_every_config_and_notebook_reaches_the_hooks(name):
    assert filetypes.by_name(name) is not None, name
    tags = identify.tags_from_filename(name)
    for hook in HOOKS:
        assert tags & set(hook["types_or"]), (hook["id"], name, tags)


@pytest.mark.parametrize("name", ["requirements.txt", "setup.cfg", "notes.txt", "tox.ini"])
def test_text_and_ini_files_are_not_passed(name):
    """identify has no tag for requirements files or setup.cfg: passing plain-text or
    ini would hand the hooks every .txt and .ini file, which the tool only warns about."""
    tags = identify.tags_from_filename(name)
    for hook in HOOKS:
        assert not tags & set(hook["types_or"]), (hook["id"], name, tags)
