"""Corpus download/unpack logic, with the downloader replaced (no network)."""

import io
import tarfile
import zipfile

import pytest

from bench import corpus


def make_wheel(path):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/__init__.py", "x = 1\n")
        zf.writestr("pkg/sub/mod.py", "a = 1\nb = 2")          # no final newline: still 2 lines
        zf.writestr("pkg/data.json", "{}")                     # not Python: left out
        zf.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\n")
        zf.writestr("../evil.py", "boom\n")                    # escapes the target: refused
    return path


def make_sdist(path):
    with tarfile.open(path, "w:gz") as tf:
        for name, text in {"pkg-1.0/setup.py": "setup()\n", "pkg-1.0/pkg/a.py": "1\n2\n3\n",
                           "pkg-1.0/README.md": "hi\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_unpack_wheel_keeps_only_safe_python_files(tmp_path):
    files, lines = corpus.unpack_python_files(make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl"), tmp_path / "out")
    got = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert got == ["pkg/__init__.py", "pkg/sub/mod.py"]
    assert (files, lines) == (2, 3)
    assert not (tmp_path / "evil.py").exists()


def test_unpack_sdist_strips_the_top_directory(tmp_path):
    files, lines = corpus.unpack_python_files(make_sdist(tmp_path / "pkg-1.0.tar.gz"), tmp_path / "out")
    assert (files, lines) == (2, 4)
    assert (tmp_path / "out" / "pkg" / "a.py").read_text() == "1\n2\n3\n"
    assert (tmp_path / "out" / "setup.py").is_file()


def test_ensure_project_downloads_once_then_uses_the_cache(tmp_path):
    calls = []

    def fake_download(name, version, dest):
        calls.append((name, version))
        dest.mkdir(parents=True, exist_ok=True)
        return make_wheel(dest / f"{name}-{version}-py3-none-any.whl")

    first = corpus.ensure_project("pkg", "1.0", tmp_path, downloader=fake_download)
    second = corpus.ensure_project("pkg", "1.0", tmp_path, downloader=fake_download)
    assert calls == [("pkg", "1.0")]
    assert first == second
    assert first.root == tmp_path / "src" / "pkg-1.0"
    assert (first.files, first.lines) == (2, 3)
    assert first.artifact == "pkg-1.0-py3-none-any.whl" and first.artifact_bytes > 0
    assert [p.as_posix() for p in corpus.python_files(first.root)] == ["pkg/__init__.py", "pkg/sub/mod.py"]
    assert [p.as_posix() for p in corpus.python_files(first.root, sample=2)] == ["pkg/__init__.py"]


def test_failed_download_is_skipped_with_a_warning_unless_strict(tmp_path):
    def fake_download(name, version, dest):
        if name == "broken":
            raise corpus.CorpusError("no such version")
        dest.mkdir(parents=True, exist_ok=True)
        return make_wheel(dest / f"{name}-{version}-py3-none-any.whl")

    with pytest.warns(UserWarning, match="skipping broken==9"):
        got = corpus.ensure_corpus({"broken": "9", "pkg": "1.0"}, tmp_path, downloader=fake_download)
    assert [p.name for p in got] == ["pkg"]
    with pytest.raises(corpus.CorpusError):
        corpus.ensure_corpus({"broken": "9"}, tmp_path, strict=True, downloader=fake_download)
    assert not (tmp_path / "src" / "broken-9").exists()


def test_every_project_is_pinned_to_an_exact_version():
    assert set(corpus.PROJECTS) == {"transformers", "timm", "ultralytics", "accelerate", "deepspeed",
                                    "lightning", "diffusers", "peft", "trl", "mmengine"}
    for version in corpus.PROJECTS.values():
        assert version.count(".") == 2 and all(part.isdigit() for part in version.split("."))
    assert corpus.parse_projects("accelerate,timm") == {"accelerate": "1.15.0", "timm": "1.0.31"}
    assert corpus.parse_projects("accelerate==1.0.0") == {"accelerate": "1.0.0"}
    with pytest.raises(SystemExit):
        corpus.parse_projects("nonesuch")


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_MIGRATE_CORPUS_CACHE", str(tmp_path / "c"))
    assert corpus.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("NPU_MIGRATE_CORPUS_CACHE")
    assert corpus.default_cache_dir().parts[-3:] == (".cache", "npu-migrate", "corpus")
