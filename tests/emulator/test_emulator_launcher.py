"""Launcher behaviour: refusal, isolation, strict mode, build cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.emulate import SITE_DIR, launcher
from npu_migrate.emulate.detect import find_real_torch_npu

from .conftest import SCRIPTS, json_report, run_emulated


def _fake_real_torch_npu(root: Path) -> Path:
    pkg = root / "torch_npu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "raise SystemExit('the fake real torch_npu was imported')\n"
    )
    return pkg


def test_plain_interpreter_cannot_import_torch_npu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", "import torch_npu"],
        env=env,
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "No module named 'torch_npu'" in proc.stderr


def test_stand_in_is_not_on_the_normal_path():
    assert find_real_torch_npu(sys.path) is None
    assert str(SITE_DIR) not in sys.path
    # ...but it is what the launcher's children see first.
    assert launcher.child_env(base={})["PYTHONPATH"].split(os.pathsep)[0] == str(
        SITE_DIR
    )


def test_refuses_when_a_real_torch_npu_is_on_pythonpath(tmp_path, monkeypatch, capsys):
    fake_root = tmp_path / "site-packages"
    _fake_real_torch_npu(fake_root)
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w').write('yes')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake_root))
    rc = launcher.run(str(script), [])
    assert rc == launcher.EXIT_REFUSED
    assert "real torch_npu is importable" in capsys.readouterr().err
    assert not (tmp_path / "ran").exists()


def test_refuses_when_a_torch_npu_sits_next_to_the_script(tmp_path):
    _fake_real_torch_npu(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "npu_migrate.emulate", str(script)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == launcher.EXIT_REFUSED
    assert "refusing to run" in proc.stderr
    assert "ran" not in proc.stdout


def test_missing_script_is_a_usage_error(tmp_path):
    assert launcher.run(str(tmp_path / "nope.py"), []) == 2


def test_child_env_sets_devices_and_strict():
    env = launcher.child_env(nproc=2, strict=True, base={"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(SITE_DIR), "/x"])
    assert env["NPU_MIGRATE_EMULATOR_DEVICES"] == "2"
    assert env["NPU_MIGRATE_EMULATOR_STRICT"] == "1"
    assert "NPU_MIGRATE_EMULATOR_STRICT" not in launcher.child_env(base={})


def test_cache_key_depends_on_sources(monkeypatch, tmp_path):
    from npu_migrate.emulate import build

    monkeypatch.setenv("NPU_MIGRATE_EMULATOR_CACHE", str(tmp_path))
    key = build.cache_key()
    assert build.build_dir() == tmp_path / key
    monkeypatch.setattr(build, "CFLAGS", ("-O2",))
    assert build.cache_key() != key


@pytest.mark.timeout(120)
def test_cache_key_has_torchs_version_without_importing_torch():
    """The launcher only needs torch's version for the key: it must not pay for importing
    torch (its child imports it anyway), and the version is torch.__version__ exactly."""
    import torch

    from npu_migrate.emulate import build

    assert build.torch_version() == torch.__version__
    probe = ("import sys; from npu_migrate.emulate import build; key = build.cache_key(); "
             "print(key, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=100, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [build.cache_key(), "False"]


def test_cache_key_covers_every_part_of_the_unit():
    """The build compiles npu_emu.cpp, which includes the parts: each part is in the key."""
    from npu_migrate.emulate import build

    unit = (build.CSRC_DIR / build.UNIT).read_text()
    included = set(re.findall(r'#include "([^"]+)"', unit))
    assert included and included | {build.UNIT} == set(build.SOURCES)
    assert {p.name for p in build.CSRC_DIR.glob("*.cpp")} == set(build.SOURCES)


def _fake_compiler(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    from npu_migrate.emulate import build

    monkeypatch.setenv("NPU_MIGRATE_EMULATOR_CACHE", str(tmp_path))
    compiled = []

    def load(name, sources, build_directory, **kwargs):
        compiled.append(sources)
        path = Path(build_directory) / f"{name}.so"
        path.write_bytes(b"")
        return str(path)

    monkeypatch.setattr(cpp_extension, "load", load)
    monkeypatch.setattr(build, "_loaded_path", None)
    return build, compiled


def test_a_build_says_so_on_stderr(monkeypatch, tmp_path, capsys):
    build, compiled = _fake_compiler(monkeypatch, tmp_path)
    build.build()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "npu-migrate emulate: building the emulated NPU (first use; cached afterwards) ..."
    assert re.fullmatch(r"npu-migrate emulate: built the emulated NPU in \d+ s \(.*\)", err[1])
    assert compiled == [[str(build.CSRC_DIR / build.UNIT)]]  # one translation unit
    build.build()  # cached: silent
    assert capsys.readouterr().err == ""


def test_a_quiet_build_says_nothing(monkeypatch, tmp_path, capsys):
    build, _ = _fake_compiler(monkeypatch, tmp_path)
    build.build(quiet=True)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_exit_code_and_arguments_pass_through(emulator_build, tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(
        "import sys, torch, torch_npu\n"
        "assert torch.ones(1).npu().device.type == 'npu'\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    assert run_emulated(script, "7").returncode == 7
    assert run_emulated(script, "0").returncode == 0


@pytest.mark.slow
def test_second_build_is_a_cache_hit(emulator_build):
    proc = subprocess.run(
        [sys.executable, "-m", "npu_migrate.emulate", "--build-only"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("cached:")
    assert str(emulator_build) in proc.stdout


@pytest.mark.slow
def test_strict_mode_rejects_float64_and_denied_ops(emulator_build):
    r = json_report(
        run_emulated(
            SCRIPTS / "probe_strict.py",
            strict=True,
            env={"NPU_MIGRATE_EMULATOR_DENY_OPS": "median, aten::sort"},
        )
    )
    assert r["float32"]["ok"] is True
    for key in ("factory_f64", "to_double", "cpu_f64_to_npu"):
        assert r[key]["ok"] is False and r[key]["type"] == "TypeError", key
        assert "strict mode" in r[key]["msg"]
    assert r["cpu_f64_stays_ok"]["ok"] is True
    assert r["denied_op"]["type"] == "NotImplementedError"
    assert "aten::median" in r["denied_op"]["msg"]
    assert r["allowed_op"]["ok"] is True


@pytest.mark.slow
def test_without_strict_float64_and_deny_list_are_inactive(emulator_build):
    r = json_report(
        run_emulated(
            SCRIPTS / "probe_strict.py", env={"NPU_MIGRATE_EMULATOR_DENY_OPS": "median"}
        )
    )
    assert r["factory_f64"] == {"ok": True, "value": "torch.float64"}
    assert r["denied_op"]["ok"] is True


def test_child_env_fixes_the_hash_seed_unless_the_user_set_one():
    # str hashing randomised per process made a list(set(text)) vocabulary, and with it every
    # loss and sampled token, differ between runs and between ranks (docs/emulator.md, "Determinism")
    assert launcher.child_env(base={})["PYTHONHASHSEED"] == "0"
    assert launcher.child_env(base={"PYTHONHASHSEED": "123"})["PYTHONHASHSEED"] == "123"
