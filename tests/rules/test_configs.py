"""The config-file front end (YAML, JSON, TOML): the readers' positions, byte
preservation outside the edited scalars, bad input, suppression comments, and
hypothesis properties over generated configs in all three formats."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tomlkit
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from npu_migrate.rules.configs.npu830_config_cuda_device import SIMULATOR_SECTIONS

from npu_migrate.configs import json_reader, toml_reader, yaml_reader
from npu_migrate.configs.engine import migrate
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

ALL = Settings(selection=Selection.create(["ALL"]))
READERS = {"yaml": yaml_reader, "json": json_reader, "toml": toml_reader}


def run(name: str, text: str | bytes, settings: Settings = ALL):
    data = text.encode() if isinstance(text, str) else text
    return migrate(name, data, settings)


# -- the readers ---------------------------------------------------------------

SAMPLES = {
    "yaml": 'a: "x"\ndevice: cuda  # c\nl: [\'cuda:0\', {k: é}]\nblock: |\n  text\n---\nsecond: doc\n',
    "json": '{"a": "x", "device": "cuda", "l": ["cuda:0", {"k": "\\u00e9"}], "n": 1}\n',
    "toml": '[a]\nx = "1"\n[b]\ndevice = \'cuda\'\n[a.c]\nl = ["cuda:0", {k = "é"}]\nflag = true\n',
}


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_every_scalar_is_where_the_reader_says(fmt):
    data = SAMPLES[fmt].encode()
    document = READERS[fmt].read(data)
    assert document.scalars, "nothing read"
    for scalar in document.scalars:
        raw = data[scalar.start : scalar.end].decode()
        if scalar.editable:
            assert raw == scalar.render(scalar.value)
        else:
            assert scalar.value in raw or "\\" in raw or "\n" in raw
    values = [s.value for s in document.scalars if not s.is_key]
    assert "cuda" in values and "cuda:0" in values


def test_toml_positions_follow_the_text_not_tomlkits_table_order():
    data = b'[a]\nx = "1"\n[b]\ny = "2"\n[a.c]\nz = "3"\n'
    scalars = [s for s in toml_reader.read(data).scalars if not s.is_key]
    assert [(s.keys, data[s.start : s.end]) for s in scalars] == [
        (("a", "x"), b'"1"'), (("b", "y"), b'"2"'), (("a", "c", "z"), b'"3"')]


def test_yaml_positions_are_bytes_after_non_ascii_text():
    data = "\ufeffname: 😀é\ndevice: cuda\n".encode()
    document = yaml_reader.read(data)
    device = next(s for s in document.scalars if s.value == "cuda")
    assert data[device.start : device.end] == b"cuda"


@pytest.mark.parametrize(
    "name,text,line",
    [
        ("a.yaml", "device: cuda\nx: [1, 2\ny: 3\n", 3),
        ("a.json", '{\n  "device": "cuda",\n  "x": 1,,\n}\n', 3),  # a trailing comma alone is JSONC
        ("a.toml", 'device = "cuda"\nx = = 1\n', 2),
        ("a.yaml", b"device: cuda\nx: \xff\n", 2),
    ],
)
def test_bad_input_is_one_line_and_the_file_is_untouched(name, text, line):
    result = run(name, text)
    assert result.new_source is None and result.error is not None
    assert result.error.startswith(f"{name}:{line}: not ")
    assert "\n" not in result.error


def test_a_file_without_triggers_is_not_parsed():
    """Helm templates and the like are not YAML; without a CUDA-ism they are never read."""
    result = run("chart.yaml", "replicas: {{ .Values.replicas }}\n  bad: [\n")
    assert result.error is None and result.new_source is None


def test_cli_directory_run_migrates_configs_and_reports_bad_ones(tmp_path, run_cli):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_bytes(b"device: cuda\n")
    (tmp_path / "ds.json").write_bytes(b'{"dist_backend": "nccl"}\n')
    (tmp_path / "bad.yaml").write_bytes(b"device: cuda\nx: [\n")
    result = run_cli("--write", ".")
    assert result.exit_code == 2
    assert "error: bad.yaml:2: not valid YAML" in result.output
    assert (tmp_path / "conf" / "train.yaml").read_bytes() == b"device: npu\n"
    assert (tmp_path / "ds.json").read_bytes() == b'{"dist_backend": "hccl"}\n'
    assert (tmp_path / "bad.yaml").read_bytes() == b"device: cuda\nx: [\n"
    assert run_cli("--check", "conf", "ds.json").exit_code == 0


# -- suppression and annotation ------------------------------------------------

def test_a_hash_inside_a_string_is_not_a_suppression_comment():
    text = 'device: cuda\nnote: "x  # npu-migrate: ignore"\ndev: cuda  # npu-migrate: ignore[NPU830]\n'
    result = run("a.yaml", text)
    assert result.new_source == b'device: npu\nnote: "x  # npu-migrate: ignore"\ndev: cuda  # npu-migrate: ignore[NPU830]\n'


def test_toml_suppression_and_json_has_none():
    toml = run("a.toml", 'device = "cuda"  # npu-migrate: ignore\nx = "# npu-migrate: ignore"\ndev = "cuda"\n')
    assert toml.new_source == b'device = "cuda"  # npu-migrate: ignore\nx = "# npu-migrate: ignore"\ndev = "npu"\n'
    result = run("a.json", '{"device": "cuda"}  // npu-migrate: ignore\n')
    assert result.new_source == b'{"device": "npu"}  // npu-migrate: ignore\n'


def test_annotate_writes_yaml_comments_and_is_idempotent():
    settings = Settings(selection=Selection.create(["ALL"]), annotate=True)
    text = "train:\n  gpu: cuda\n"
    first = run("a.yaml", text, settings)
    assert first.new_source.decode().startswith("train:\n  # npu-migrate: NPU832 `cuda` under `gpu`")
    assert run("a.yaml", first.new_source, settings).new_source is None
    assert yaml.safe_load(first.new_source) == yaml.safe_load(text)
    assert run("a.json", '{"gpu": "cuda"}\n', settings).new_source is None  # JSON: nowhere to put it


# -- properties ----------------------------------------------------------------

KEYS = ["device", "eval_device", "backend", "dist_backend", "name", "lr", "accelerator", "devices", "notes", "env"]
CUDA_VALUES = ["cuda", "cuda:0", "cuda:3", "nccl", "cpu:gloo,cuda:nccl"]
PLAIN_VALUES = ["cpu", "gloo", "adamw", "resnet", "train on cuda GPUs", "npu:0", "a#b", "x: y", "0.1"]
leaf = st.one_of(st.sampled_from(PLAIN_VALUES), st.integers(-5, 500), st.booleans())


def tree(values):
    return st.recursive(
        st.dictionaries(st.sampled_from(KEYS), values, max_size=4),
        lambda children: st.dictionaries(st.sampled_from(KEYS), st.one_of(children, st.lists(values, max_size=3)),
                                         max_size=4),
        max_leaves=12,
    )


def dump(fmt: str, data: dict, style: int) -> str:
    if fmt == "yaml":
        return yaml.safe_dump(data, default_flow_style=[False, True, None][style % 3], sort_keys=bool(style & 4),
                              width=40)
    if fmt == "json":
        return json.dumps(data, indent=[None, 1, 4][style % 3], ensure_ascii=bool(style & 4)) + "\n"
    return tomlkit.dumps({"section": data}) if data else ""


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(READERS)), tree(leaf), st.integers(0, 7))
def test_configs_without_cuda_isms_are_never_touched(fmt, data, style):
    text = dump(fmt, data, style)
    result = run(f"c.{fmt}", text)
    assert result.error is None and result.new_source is None and result.findings == []


def _between_scalars(fmt: str, data: bytes) -> list[bytes]:
    """The file's bytes with every scalar's text cut out."""
    pieces, cursor = [], 0
    for scalar in READERS[fmt].read(data).scalars:
        if scalar.start >= cursor:
            pieces.append(data[cursor : scalar.start])
            cursor = scalar.end
    return [*pieces, data[cursor:]]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(READERS)), tree(st.one_of(leaf, st.sampled_from(CUDA_VALUES))), st.integers(0, 7))
@example(fmt="json", data={"device": {}, "env": {"device": "cpu", "eval_device": "cuda", "backend": "nccl"}}, style=0)
def test_only_scalars_change_and_a_second_run_agrees(fmt, data, style):
    text = dump(fmt, data, style)
    first = run(f"c.{fmt}", text)
    assert first.error is None
    out = first.new_source if first.new_source is not None else text.encode()
    # Every byte outside the scalars is the same (comments, quoting, indentation, order).
    assert _between_scalars(fmt, out) == _between_scalars(fmt, text.encode())
    second = run(f"c.{fmt}", out)
    assert second.new_source is None, "a second run changed the file again"
    assert [(f.line, f.rule, f.message) for f in second.findings] == [(f.line, f.rule, f.message) for f in first.findings]
    if first.new_source is not None:
        loaded = {"yaml": yaml.safe_load, "json": json.loads, "toml": tomlkit.parse}[fmt](out.decode())
        assert "nccl" not in json.dumps(_values_under(loaded, ("backend", "dist_backend")))
        # (a device below a simulator's section, `env:`, is the simulator's: reported, left)
        assert not any(v.startswith("cuda") for v in _values_under(loaded, ("device", "eval_device"),
                                                                   skip=SIMULATOR_SECTIONS))


def _values_under(node, keys: tuple[str, ...], holder: str | None = None, skip=frozenset()) -> list[str]:
    if isinstance(node, dict):
        return [v for k, child in node.items() if str(k).lower() not in skip for v in _values_under(child, keys, k, skip)]
    if isinstance(node, list):
        return [v for child in node for v in _values_under(child, keys, holder, skip)]
    return [str(node)] if holder in keys and isinstance(node, str) else []


def test_fixture_configs_keep_every_byte_outside_the_edited_scalars():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
    checked = 0
    for before in sorted(root.glob("NPU83*/*.before.*")):
        fmt = before.suffix.lstrip(".")
        fmt = "yaml" if fmt == "yml" else fmt
        after = before.with_name(before.name.replace(".before.", ".after."))
        assert _between_scalars(fmt, after.read_bytes()) == _between_scalars(fmt, before.read_bytes()), before.name
        checked += 1
    assert checked >= 8


# -- speed: a Python-only tree never loads this front end -------------------------

def test_python_only_runs_do_not_import_the_config_front_end(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    code = (
        "import sys\n"
        "from npu_migrate.cli import main\n"
        "try:\n"
        f"    main([{str(tmp_path)!r}, '--no-cache', '-j', '1', '-q'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('npu_migrate.configs', 'yaml', 'tomlkit', 'tree_sitter_json'))))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_run_never_migrates_its_own_report(tmp_path, run_cli):
    (tmp_path / "train.yaml").write_bytes(b"device: cuda\n")
    run_cli(".", "--report", "r.json")
    run_cli(".", "--report", "r.json")  # r.json (with `cuda` in its messages) is in the tree now
    assert [f["path"] for f in json.loads((tmp_path / "r.json").read_text())["files"]] == ["train.yaml"]


def test_config_rewrites_name_the_key_as_their_evidence():
    result = migrate("train.yaml", b"trainer:\n  device: cuda:0\n  dist_backend: nccl\n", Settings())
    reasons = {f.rule: f.reason for f in result.fixes}
    assert reasons == {"NPU830": "the value of the config key `device`, a name that holds a device",
                       "NPU831": "the value of the config key `dist_backend`, a name that holds a process-group backend"}
