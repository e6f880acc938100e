"""Templated config files (Helm charts, Jinja, Go templates, cookiecutter projects) are
skipped, not errors and not rewritten (npu_migrate/configs/templates.py; docs/decisions.md,
"Templates"). Found on prime-rl, whose Helm chart made every `npu-migrate --check` exit 2
with ``templates/deployment.yaml:1: not valid YAML``.

The chart below is written for these tests, in the shape of such a chart (a conditional
around a StatefulSet, include/nindent lines, GPU resources and an NCCL port)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.configs.engine import migrate
from npu_migrate.configs.templates import has_markers, neutralize
from npu_migrate.pipeline.file_roles import template_place
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

from ._files import write

ALL = Settings(selection=Selection.create(["ALL"]))

CHART = "apiVersion: v2\nname: trainer\nversion: 0.1.0\n"
VALUES = textwrap.dedent("""\
    trainer:
      enabled: true
      device: cuda
      gpus: 8
    """)
DEPLOYMENT = textwrap.dedent("""\
    {{- if .Values.trainer.enabled }}
    apiVersion: apps/v1
    kind: StatefulSet
    metadata:
      name: {{ .Release.Name }}-trainer
      labels:
        {{- include "trainer.labels" . | nindent 4 }}
    spec:
      template:
        spec:
          containers:
          - name: trainer
            image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
            args: ["--device", "cuda", "--backend", "nccl"]
            env:
            - name: NCCL_SOCKET_IFNAME
              value: eth0
            ports:
            - containerPort: {{ .Values.trainer.ncclPort }}
              name: nccl
            resources:
              limits:
                nvidia.com/gpu: {{ .Values.trainer.gpus }}
    {{- end }}
    """)
SERVICE = textwrap.dedent("""\
    {{- if .Values.trainer.enabled }}
    apiVersion: v1
    kind: Service
    spec:
      ports:
      - port: {{ .Values.trainer.ncclPort }}
        targetPort: nccl
        name: nccl
    {{- end }}
    """)
#: A template that happens to parse: rewriting it would still be rewriting a template.
PARSES = 'kind: ConfigMap\ndata:\n  device: cuda\n  backend: "nccl"\n'


def chart(root: Path) -> dict[str, bytes]:
    """A Helm chart under ``root/deploy/trainer``; its files by relative path."""
    files = {
        "deploy/trainer/Chart.yaml": CHART,
        "deploy/trainer/values.yaml": VALUES,
        "deploy/trainer/templates/deployment.yaml": DEPLOYMENT,
        "deploy/trainer/templates/service.yaml": SERVICE,
        "deploy/trainer/templates/tests/configmap.yaml": PARSES,
    }
    return {rel: write(root, rel, text).read_bytes() for rel, text in files.items()}


# -- markers ---------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "{{- if .Values.x }}", "a: {{ b }}", "{% for x in y %}", "x {%- if a -%} y", "{{cookiecutter.name}}",
    "{{\n}}",
])
def test_markers(text):
    assert has_markers(text.encode())


@pytest.mark.parametrize("text", [
    "", "a: {b: c}", "x: ${oc.env:HOME}", "{{ unclosed", "}} {{", "%} {%", "a: '{'", "{ {x} }", "${{ x }",
])
def test_not_markers(text):
    assert not has_markers(text.encode())


def test_markers_are_found_in_linear_time():
    assert not has_markers(b"{{" * 2_000_000)  # 4 MB of openers and no closer: two finds


# -- by text: a file that does not parse and holds markers -----------------------------

@pytest.mark.parametrize("name,text", [
    ("deployment.yaml", DEPLOYMENT),
    ("service.yaml", SERVICE),
    ("playbook.yml", "- hosts: gpus\n  tasks:\n  {% for d in devices %}\n  - device: cuda\n  {% endfor %}\n"),
    ("config.json", '{"device": "cuda", "gpus": {{ n }}}\n'),
    ("config.toml", 'device = "cuda"\ngpus = {{ n }}\n'),
])
def test_a_template_that_does_not_parse_is_skipped_not_an_error(name, text):
    result = migrate(name, text.encode(), ALL)
    assert result.error is None
    assert result.new_source is None and result.fixes == []  # findings only: see below
    assert result.is_template
    assert result.skipped.endswith("as written)")


def test_what_a_template_would_have_rewritten_is_reported_at_its_place():
    """A template is read with its actions blanked out: a rewrite becomes a finding at the
    same line and column, and the text around the actions is reported as in any file."""
    result = migrate("deployment.yaml", DEPLOYMENT.encode(), ALL)
    assert result.new_source is None and result.fixes == []
    lines = DEPLOYMENT.splitlines()
    found = {(f.rule, lines[f.line - 1][f.col:]) for f in result.findings}  # col: 0-based
    assert ("NPU830", '"cuda", "--backend", "nccl"]') in found  # args: ["--device", "cuda", ...]
    assert ("NPU831", '"nccl"]') in found
    assert ("NPU962", "nvidia.com/gpu: {{ .Values.trainer.gpus }}") in found
    assert all(f.message.startswith("template, left unchanged: ") for f in result.findings
               if f.rule in ("NPU830", "NPU831"))
    assert not any(f.rule == "NPU832" for f in result.findings)  # `name: nccl` of a port


@pytest.mark.parametrize("name,text,line", [
    ("bad.yaml", "device: cuda\nx: [1, 2\ny: 3\n", 3),
    ("bad.yaml", "device: cuda\nx: ${oc.env:X}\ny: [\n", 3),  # an interpolation is no template marker
    ("bad.yaml", "device: cuda\nx: {{ unclosed\n", 2),  # an opener without its closer
    ("bad.json", '{"device": "cuda",,}\n', 1),
])
def test_bad_input_without_markers_is_still_an_error(name, text, line):
    result = migrate(name, text.encode(), ALL)
    assert not result.is_template and result.skipped is None
    assert result.error is not None and result.error.startswith(f"{name}:{line}: not valid ")


def test_a_file_with_markers_that_parses_is_migrated():
    """An Ansible vars file, a workflow's ``${{ }}``: valid files, read as they are."""
    text = 'host: "{{ inventory_hostname }}"\ndevice: cuda\nrun: "${{ matrix.python }}"\n'
    result = migrate("vars.yaml", text.encode(), ALL)
    assert result.skipped is None and result.error is None
    assert result.new_source == text.replace("device: cuda", "device: npu").encode()


def test_over_a_bound_is_still_an_error_with_markers():
    """Only a parse failure is explained by the markers; a size bound is not."""
    text = ("x: {{ y }}\n" + "k: cuda\n" * 11_000).encode()
    result = migrate("big.yaml", text, ALL)
    assert result.skipped is None and result.error is not None


# -- by place: a Helm chart's templates/, a project template's {{ }} folder -------------

def test_every_file_under_a_charts_templates_folder_is_a_template(tmp_path):
    files = chart(tmp_path)
    for rel, data in files.items():
        result = migrate(str(tmp_path / rel), data, ALL)
        assert result.error is None
        if "/templates/" in rel:
            assert result.is_template and "Helm chart" in result.skipped, rel
            assert result.new_source is None and result.fixes == []
        else:
            assert not result.is_template, rel
    assert yaml.safe_load(PARSES)  # the one that parses is skipped too
    values = migrate(str(tmp_path / "deploy/trainer/values.yaml"), files["deploy/trainer/values.yaml"], ALL)
    assert values.new_source == VALUES.replace("device: cuda", "device: npu").encode()  # values are configuration


def test_a_templates_folder_without_chart_yaml_is_configuration(tmp_path):
    path = write(tmp_path, "app/templates/train.yaml", PARSES)
    assert template_place(str(path)) is None
    result = migrate(str(path), path.read_bytes(), ALL)
    assert result.skipped is None and result.new_source is not None


def test_a_chart_above_a_folder_not_named_templates_is_not_enough(tmp_path):
    write(tmp_path, "chart/Chart.yaml", CHART)
    path = write(tmp_path, "chart/examples/train.yaml", PARSES)
    assert template_place(str(path)) is None


def test_relative_and_absolute_paths_agree(tmp_path, monkeypatch):
    chart(tmp_path)
    monkeypatch.chdir(tmp_path / "deploy")
    assert template_place("trainer/templates/service.yaml") == template_place(
        str(tmp_path / "deploy/trainer/templates/service.yaml")) is not None


def test_a_cookiecutter_project_is_a_template(tmp_path):
    path = write(tmp_path, "{{cookiecutter.project_slug}}/configs/train.yaml", PARSES)
    result = migrate(str(path), path.read_bytes(), ALL)
    assert result.is_template and "{{ }}" in result.skipped and result.new_source is None


# -- Python templates ----------------------------------------------------------------------

JINJA_PYTHON = ("import torch\n{% if cookiecutter.amp %}\nscaler = torch.cuda.amp.GradScaler()\n{% endif %}\n"
                "x = torch.ones(2).cuda()\nname = \"{{ cookiecutter.name }}\"\n")


@pytest.mark.parametrize("name", ["{{cookiecutter.slug}}/train.py", "train.py"])
def test_a_python_template_is_reported_on_never_rewritten_nor_an_error(tmp_path, name):
    from npu_migrate.python.engine import migrate_source

    path = write(tmp_path, name, JINJA_PYTHON)
    result = migrate_source(str(path), path.read_bytes(), ALL)
    assert result.error is None and result.new_source is None and result.fixes == []
    assert result.is_template
    # what the rules would rewrite is reported at its place, the blanked actions changing no line
    assert {(f.line, f.rule) for f in result.findings} >= {(3, "NPU301"), (5, "NPU103")}
    assert all(f.message.startswith("template, left unchanged") for f in result.findings if f.rule != "NPU108")


def test_python_under_a_cookiecutter_path_is_a_template_even_where_it_parses(tmp_path):
    from npu_migrate.python.engine import migrate_source

    path = write(tmp_path, "{{cookiecutter.slug}}/ok.py", "import torch\nx = torch.ones(2).cuda()\n")
    result = migrate_source(str(path), path.read_bytes(), ALL)
    assert result.is_template and result.new_source is None and "{{ }}" in result.skipped
    assert {(f.line, f.rule) for f in result.findings} == {(1, "NPU100"), (2, "NPU103")}


def test_python_without_markers_that_does_not_parse_is_still_an_error(tmp_path):
    from npu_migrate.python.engine import migrate_source

    path = write(tmp_path, "train.py", "import torch\nx = torch.ones(2).cuda(\n")
    result = migrate_source(str(path), path.read_bytes(), ALL)
    assert result.error is not None and not result.is_template


def test_a_python_template_that_does_not_read_even_blanked_is_skipped(tmp_path):
    from npu_migrate.python.engine import migrate_source

    # the blanked `{% if %}` leaves the body indented under nothing
    path = write(tmp_path, "train.py", "import torch\nx = 1\n{% if amp %}\n    y = torch.ones(2).cuda()\n{% endif %}\n")
    result = migrate_source(str(path), path.read_bytes(), ALL)
    assert result.error is None and result.is_template and result.findings == [] and result.new_source is None


# -- the command line ---------------------------------------------------------------------

def test_check_on_a_tree_with_a_chart_passes_and_writes_nothing(tmp_path, run_cli):
    files = chart(tmp_path)
    before = {rel: (tmp_path / rel).read_bytes() for rel in files}
    write(tmp_path, "train.yaml", "trainer: {device: cpu}\n")
    result = run_cli("--check", "--no-cache", "deploy/trainer/templates", "train.yaml")
    assert result.exit_code == 0, result.output
    assert "error" not in result.output
    assert "3 template file(s) skipped" in result.output
    result = run_cli("--write", "--no-cache", ".", "--report", str(tmp_path.parent / "report.json"))
    assert result.exit_code == 0, result.output
    for rel, data in before.items():
        if "/templates/" in rel:
            assert (tmp_path / rel).read_bytes() == data, rel
    assert (tmp_path / "deploy/trainer/values.yaml").read_bytes() != before["deploy/trainer/values.yaml"]
    report = json.loads((tmp_path.parent / "report.json").read_text())
    assert report["summary"]["files_skipped_template"] == 3
    assert report["summary"]["files_skipped_data"] == 0 and report["summary"]["files_failed"] == 0
    skipped = {Path(f["path"]).name: f["skipped"] for f in report["files"] if f["skipped"]}
    assert set(skipped) == {"deployment.yaml", "service.yaml", "configmap.yaml"}


def test_a_chart_made_after_a_cached_run_makes_its_templates_templates(tmp_path, run_cli):
    """The cache key of a file includes whether its place makes it a template: a
    ``Chart.yaml`` added beside ``templates/`` is not answered from the earlier entry."""
    path = write(tmp_path, "deploy/templates/configmap.yaml", PARSES)
    cache = ["--cache-dir", str(tmp_path.parent / "cache")]
    first = run_cli("--check", *cache, "deploy")
    assert first.exit_code == 1 and "would migrate" in first.output  # configuration, until a chart is there
    write(tmp_path, "deploy/Chart.yaml", CHART)
    second = run_cli("--write", *cache, "deploy")
    assert second.exit_code == 0, second.output
    assert "1 template file(s) skipped" in second.output
    assert path.read_text() == PARSES


def test_real_bad_yaml_beside_a_chart_still_fails_the_run(tmp_path, run_cli):
    chart(tmp_path)
    write(tmp_path, "conf/bad.yaml", "device: cuda\nx: [\n")
    result = run_cli("--check", "--no-cache", ".")
    assert result.exit_code == 2
    assert "error: conf/bad.yaml:2: not valid YAML" in result.output
    assert "error: deploy" not in result.output and result.output.count("error:") == 1


# -- properties ------------------------------------------------------------------------------

KEYS = ["device", "backend", "dist_backend", "name", "env", "accelerator"]
VALUES_ = ["cuda", "cuda:0", "nccl", "cpu", "gloo", "adamw", "train on cuda GPUs"]
config = st.recursive(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES_), max_size=4),
                      lambda children: st.dictionaries(st.sampled_from(KEYS), children, max_size=3), max_leaves=10)
TEMPLATE_LINES = ["{{- if .Values.enabled }}", "{{- end }}", "  {{- include \"labels\" . | nindent 4 }}",
                  "{% for d in devices %}", "{% endfor %}", "replicas: {{ .Values.replicas }}"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config, st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TEMPLATE_LINES)), min_size=1, max_size=4),
       st.booleans())
def test_templated_yaml_is_never_an_error_and_a_second_run_agrees(data, inserts, flow):
    lines = yaml.safe_dump({"root": data}, default_flow_style=flow).splitlines()
    for at, line in inserts:
        lines.insert(min(at, len(lines)), line)
    text = ("\n".join(lines) + "\n").encode()
    first = migrate("conf.yaml", text, ALL)
    assert first.error is None, first.error  # a template, or a file that parses with its markers
    if first.is_template:
        assert first.new_source is None and first.fixes == []
    second = migrate("conf.yaml", first.new_source or text, ALL)
    assert second.error is None and second.new_source is None
    assert second.skipped == first.skipped
    if first.is_template:
        assert second.findings == first.findings  # a second run reports the same findings


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config, st.integers(0, 40))
def test_the_same_breakage_without_markers_is_still_an_error(data, at):
    lines = yaml.safe_dump({"root": data}, default_flow_style=False).splitlines()
    lines.insert(min(at, len(lines)), "broken: [")
    text = ("\n".join(lines) + "\n").encode()
    result = migrate("conf.yaml", text, ALL)
    assert result.skipped is None
    if b"cuda" in text or b"nccl" in text:  # a file without a rule's trigger word is never parsed
        assert result.error is not None and "not valid YAML" in result.error


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["{{", "}}", "{%", "%}", "{#", "#}", "\n", "  ", "a: ", "x", "-", '"']), max_size=60))
def test_neutralize_keeps_every_byte_position(parts):
    """Findings are placed on the original text by offset: the blanked-out text has the
    same length and its newlines at the same places, and keeps text outside actions."""
    data = "".join(parts).encode()
    neutral = neutralize(data)
    assert len(neutral) == len(data)
    assert [i for i, b in enumerate(neutral) if b == 10] == [i for i, b in enumerate(data) if b == 10]
    assert b"{{" not in neutral or not has_markers(neutral)


def test_neutralize_turns_lone_actions_into_comments_and_inline_ones_into_words():
    data = b"a:\n  {{- if .Values.x }}\n  b: {{ .Values.b }}\n  {{- end }}\n"
    assert neutralize(data) == b"a:\n  #                  \n  b: xxxxxxxxxxxxxxx\n  #         \n"


@pytest.mark.timeout(60)
def test_neutralize_is_linear_on_openings_without_closings():
    data = b"{{" * 1_000_000 + b"a: 1\n" + b"{%" * 500_000 + b"%}"
    assert len(neutralize(data)) == len(data)


@pytest.mark.timeout(60)
def test_neutralize_is_linear_on_a_long_line_of_actions():
    data = b"k: " + b"{{ .Values.x }}" * 200_000 + b"\n"
    assert neutralize(data) == b"k: " + b"x" * (len(data) - 4) + b"\n"


def test_a_template_too_deep_to_read_is_skipped_not_an_error(tmp_path):
    """Reading a template for findings is best effort: past the nesting or size limits
    it is skipped as before, never an error."""
    files = chart(tmp_path)
    path = tmp_path / "deploy/trainer/templates/deep.yaml"
    data = ("gpu: cuda\n" + "[" * 5000 + "]" * 5000 + "\n{{ .Values.x }}\n").encode()
    path.write_bytes(data)
    result = migrate(str(path), data, ALL)
    assert result.error is None and result.is_template and result.new_source is None
    assert files  # the chart beside it


# -- by name: Jinja templates of config files (``job.yaml.j2``) -------------------------

@pytest.mark.parametrize("name", ["job.yaml.j2", "job.yml.jinja", "deploy/config.json.j2", "pyproject.toml.jinja2"])
def test_a_jinja_config_template_is_a_template_by_its_name(tmp_path, name):
    assert template_place(str(tmp_path / name)).startswith("a Jinja template")


def test_jinja_templates_are_reported_on_and_left_unchanged(tmp_path, run_cli):
    """Ansible/cookiecutter/Beaker job templates (``job.yaml.j2``) were not read at all:
    their CUDA requests went unreported (issue 38). They are now config templates:
    findings, no rewrite, no error; a ``.j2`` of no config type is still no file of ours."""
    text = ("resources:\n  limits:\n    nvidia.com/gpu: {{ gpus }}\n"
            "env:\n  - name: CUDA_VISIBLE_DEVICES\n    value: \"0,1\"\n")
    job = write(tmp_path, "job.yaml.j2", text)
    write(tmp_path, "env.yaml.j2", "env:\n  - name: CUDA_VISIBLE_DEVICES\n    value: \"{{ devices }}\"\n")
    other = write(tmp_path, "notes.txt.j2", "device: cuda\n")
    result = run_cli("--write", "--no-cache", ".")
    assert result.exit_code == 0, result.output
    assert "job.yaml.j2:3:5: NPU962" in result.output
    # the pod asks for nvidia.com/gpu: its variable is NVIDIA's platform's (round 26)
    assert "job.yaml.j2:5:11: NPU833 `CUDA_VISIBLE_DEVICES` is set in a file that runs on NVIDIA's" in result.output
    assert "env.yaml.j2:2:11: NPU833 template, left unchanged" in result.output
    assert "2 template file(s) skipped" in result.output
    assert "notes.txt.j2" not in result.output
    assert job.read_text() == text and other.read_text() == "device: cuda\n"
