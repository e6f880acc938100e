"""Issue 30 (1): the cache can never put text into a file that the rules did not
produce for that exact input. The attacks reproduced here wrote attacker code into
``train.py`` (A: a cache shipped in the repository; B: a cache in a shared,
world-writable directory, with entries replaced between a dry run and ``--write``)
and made the victim create a file through a planted ``.gitignore`` link."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import stat
import zlib
from pathlib import Path

import pytest

CUDA = b"import torch\nn = torch.cuda.device_count()\n"
MIGRATED = b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nn = torch.npu.device_count()\n"
EVIL = "import os\nos.system('echo pwned > /tmp/pwned')\n"
PYPROJECT = b"[tool.npu-migrate]\n"


def _entries(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file() and p.name not in (".gitignore", "key")]


def _poison(directory: Path, attacker_home: Path | None) -> int:
    """Replace the new source of every entry under ``directory`` by attacker code, as an
    attacker with a copy of the entries would: a JSON entry (the old format) is edited;
    a signed entry is re-signed with the attacker's own key (the best they can do)."""
    count = 0
    for entry in _entries(directory):
        raw = entry.read_bytes()
        if raw.startswith(b"{"):
            data = json.loads(raw)
            data["new_source"] = EVIL
            entry.write_text(json.dumps(data))
        else:
            from npu_migrate.pipeline.cache import _MAC_SIZE, _MAGIC

            data = json.loads(zlib.decompress(raw[len(_MAGIC) + _MAC_SIZE:]))
            data["new_source"] = EVIL
            payload = zlib.compress(json.dumps(data).encode())
            key = (attacker_home / "npu-migrate" / "key").read_bytes()
            mac = hmac.new(key, entry.stem.encode() + b"\0" + payload, hashlib.sha256).digest()
            entry.write_bytes(_MAGIC + mac + payload)
        count += 1
    return count


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_bytes(CUDA)
    (root / "pyproject.toml").write_bytes(PYPROJECT)
    return root


def test_attack_a_cache_shipped_in_the_repository_is_never_used(tmp_path, run_cli, monkeypatch):
    # The attacker prepares the repository on their machine, with a cache in it...
    attacker_home = tmp_path / "attacker-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(attacker_home))
    evil_repo = _project(tmp_path / "evil")
    assert run_cli(".", "--cache-dir", ".npu_migrate_cache", cwd=evil_repo).exit_code == 0
    run_cli(".", cwd=evil_repo)  # and in the default place too
    shipped = evil_repo / ".npu_migrate_cache"
    assert _poison(shipped, attacker_home) >= 1
    # ...and ships it (git add -f, a tarball). The victim clones it and runs --write.
    victim_home = tmp_path / "victim-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(victim_home))
    for extra in ((), ("--cache-dir", ".npu_migrate_cache")):
        clone = tmp_path / f"clone{len(extra)}"
        shutil.copytree(evil_repo, clone)
        result = run_cli(".", "--write", *extra, cwd=clone)
        assert result.exit_code == 0, result.output
        assert (clone / "train.py").read_bytes() == MIGRATED  # what the rules produce, nothing else
        assert "pwned" not in result.output
        if extra:  # the entries it was told to use did not verify: ignored, and said so
            assert "cache entry did not verify" in result.output


def test_attack_b_shared_directory_planted_cache_and_gitignore_link(tmp_path, run_cli, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # /tmp-like: anyone can create names here
    (shared / "train.py").write_bytes(CUDA)
    # Another user pre-created the cache the old code used (no pyproject.toml above: the
    # current directory), with a .gitignore link pointing where they want a file made.
    planted = shared / ".npu_migrate_cache"
    planted.mkdir()
    planted.chmod(0o777)
    target = tmp_path / "victim-dotfiles" / "created-by-victim"
    target.parent.mkdir()
    (planted / ".gitignore").symlink_to(target)
    result = run_cli(".", cwd=shared)
    assert result.exit_code == 0, result.output
    assert not target.exists()
    # The victim's entries are replaced between the dry run and --write.
    victim_home = Path(os.environ["XDG_CACHE_HOME"])
    attacker_home = tmp_path / "attacker-home"
    (attacker_home / "npu-migrate").mkdir(parents=True)
    (attacker_home / "npu-migrate" / "key").write_bytes(os.urandom(32))
    assert _poison(planted, attacker_home) + _poison(victim_home / "npu-migrate" / "projects", attacker_home) >= 1
    result = run_cli(".", "--write", cwd=shared)
    assert (shared / "train.py").read_bytes() == MIGRATED, result.output
    assert not target.exists()


def test_cache_dir_in_a_world_writable_or_foreign_place_is_refused(tmp_path, run_cli):
    project = _project(tmp_path / "p")
    open_dir = tmp_path / "open-cache"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    result = run_cli(".", "--write", "--cache-dir", open_dir, cwd=project)
    assert result.exit_code == 0 and "cache not used" in result.output and "writable by other users" in result.output
    assert (project / "train.py").read_bytes() == MIGRATED
    assert list(open_dir.iterdir()) == []
    link = tmp_path / "link-cache"
    link.symlink_to(open_dir)
    (project / "train.py").write_bytes(CUDA)
    result = run_cli(".", "--cache-dir", link, cwd=project)
    assert "cache not used" in result.output and "symbolic link" in result.output


def test_cache_is_private_and_outside_the_repository(tmp_path, run_cli):
    from npu_migrate.pipeline.cache import default_directory, user_cache_home

    project = _project(tmp_path / "p")
    run_cli(".", cwd=project)
    assert not (project / ".npu_migrate_cache").exists()
    directory = default_directory(project)
    entries = _entries(directory)
    assert len(entries) == 2  # train.py and pyproject.toml
    for path in (user_cache_home(), directory, entries[0].parent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((user_cache_home() / "key").stat().st_mode) == 0o600
    assert stat.S_IMODE(entries[0].stat().st_mode) == 0o600
    assert (directory / ".gitignore").read_text().strip().endswith("*")


def test_a_gitignore_link_in_a_cache_dir_is_not_followed(tmp_path, run_cli):
    project = _project(tmp_path / "p")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    (cache / ".gitignore").symlink_to(target)
    assert run_cli(".", "--cache-dir", cache, cwd=project).exit_code == 0
    assert not target.exists() and _entries(cache)


def test_write_names_every_file_it_writes(tmp_path, run_cli):
    project = _project(tmp_path / "p")
    (project / "b.py").write_bytes(CUDA)
    (project / "c.py").write_bytes(b"x = 1\n")
    result = run_cli(".", "--write", cwd=project)
    wrote = sorted(line for line in result.output.splitlines() if line.startswith("wrote: "))
    assert wrote == ["wrote: b.py", "wrote: train.py"]


def test_entries_are_written_after_the_files(tmp_path, run_cli, monkeypatch):
    """The cache never takes the space a write needs: no entry exists until the files are written."""
    from npu_migrate.pipeline import cache, writer

    project = _project(tmp_path / "p")
    seen = []
    original = writer.write_atomic

    def spy(*args, **kwargs):
        seen.append(len(_entries(cache.default_directory(project))) if cache.default_directory(project).exists() else 0)
        return original(*args, **kwargs)

    monkeypatch.setattr(writer, "write_atomic", spy)
    run_cli(".", "--write", cwd=project)
    assert seen == [0] and len(_entries(cache.default_directory(project))) == 2


def test_a_full_disk_stops_caching_quietly(tmp_path, monkeypatch):
    import errno

    from npu_migrate.pipeline import cache
    from npu_migrate.pipeline.model import FileResult

    store = cache.Cache(tmp_path / "c", "settings", home=tmp_path / "home" / "npu-migrate")
    calls = []

    def full(key, result):
        calls.append(key)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "_write", full)
    for index in range(3):
        store.put(f"{index:040x}", FileResult(path=f"{index}.py"))
    store.flush()
    assert len(calls) == 1 and store.warnings == [] and store.pending == []


def test_a_verified_entry_of_the_wrong_shape_is_recomputed(tmp_path):
    from npu_migrate.pipeline import cache
    from npu_migrate.pipeline.model import FileResult

    home = tmp_path / "home" / "npu-migrate"
    store = cache.Cache(tmp_path / "c", "settings", home=home)
    key = store.key("a.py", "digest")
    store.put(key, FileResult(path="a.py", new_source=b"x\n"))
    store.flush()
    assert store.get("a.py", key).new_source == b"x\n"
    payload = zlib.compress(b'{"new_source": 5}')
    store._entry(key).write_bytes(cache._MAGIC + store._mac(key, payload) + payload)
    assert store.get("a.py", key) is None and store.warnings == []
    # An entry moved to another file's name does not verify for that name.
    other = store.key("b.py", "digest")
    store.put(key, FileResult(path="a.py", new_source=b"x\n"))
    store.flush()
    store._entry(other).parent.mkdir(exist_ok=True, mode=0o700)
    shutil.copy(store._entry(key), store._entry(other))
    assert store.get("b.py", other) is None and "did not verify" in store.warnings[0]


def test_old_generations_are_removed(tmp_path, monkeypatch):
    from npu_migrate.pipeline import cache
    from npu_migrate.pipeline.model import FileResult

    home = tmp_path / "home" / "npu-migrate"
    root = tmp_path / "c"
    old = cache.Cache(root, "s", home=home)
    old.directory = root / "0.0.9-0123456789abcdef"
    old.put(old.key("a.py", "d"), FileResult(path="a.py"))
    old.flush()
    assert old.directory.is_dir()
    new = cache.Cache(root, "s", home=home)
    new.put(new.key("a.py", "d"), FileResult(path="a.py"))
    new.flush()
    assert sorted(p.name for p in root.iterdir()) == sorted([".gitignore", new.directory.name])


@pytest.mark.parametrize("bad", ["link", "group-readable", "short"])
def test_a_key_file_that_is_not_private_disables_the_cache(tmp_path, bad):
    from npu_migrate.pipeline import cache

    home = tmp_path / "home" / "npu-migrate"
    home.mkdir(parents=True, mode=0o700)
    key = home / "key"
    if bad == "link":
        (tmp_path / "planted").write_bytes(b"k" * 32)
        key.symlink_to(tmp_path / "planted")
    elif bad == "group-readable":
        key.write_bytes(b"k" * 32)
        key.chmod(0o640)
    else:
        key.write_bytes(b"k")
        key.chmod(0o600)
    store = cache.Cache(tmp_path / "c", "s", home=home)
    assert store.get("a.py", store.key("a.py", "d")) is None
    assert store.warnings and "cache not used" in store.warnings[0]


def test_a_cache_dir_that_holds_anything_else_is_refused_and_nothing_is_removed(tmp_path, run_cli):
    """``--cache-dir .`` once removed every directory of the project (``.git`` and
    ``src`` included): the clean-up of old generations took them for generations."""
    project = _project(tmp_path / "p")
    (project / "src").mkdir()
    (project / "src" / "keep.txt").write_text("keep")
    (project / ".git").mkdir()
    result = run_cli(".", "--write", "--cache-dir", ".", cwd=project)
    assert result.exit_code == 0 and "not an npu-migrate cache directory" in result.output, result.output
    assert (project / "src" / "keep.txt").read_text() == "keep" and (project / ".git").is_dir()
    assert not (project / ".gitignore").exists()
    assert (project / "train.py").read_bytes() == MIGRATED


@pytest.mark.parametrize("how", ["open-parent", "link-into-open-dir", "foreign-parent"])
def test_a_cache_dir_another_user_could_swap_is_refused(tmp_path, run_cli, how):
    """A private cache directory in a directory others can write to (not sticky), or
    reached through a link into one, or below another user's directory, could be
    swapped for a link between the check and the clean-up of old generations."""
    project = _project(tmp_path / "p")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache = shared / "c"
    if how == "link-into-open-dir":
        (project / "lnk").symlink_to(shared)
        cache = Path("lnk") / "c"
    elif how == "foreign-parent":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a directory to another user")
        shared.chmod(0o755)
        os.chown(shared, 12345, 12345)
    result = run_cli(".", "--cache-dir", cache, cwd=project)
    assert "cache not used" in result.output and "on the cache's path" in result.output, result.output
    assert not _entries(shared)


def test_a_cache_dir_in_a_sticky_shared_directory_is_used(tmp_path, run_cli):
    project = _project(tmp_path / "p")
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    result = run_cli(".", "--cache-dir", sticky / "c", cwd=project)
    assert "cache not used" not in result.output and _entries(sticky / "c")
