"""The release ships both distributions together (issue 37.1): one version, read by both
pyproject files from the runtime's ``__init__.py``; the release workflow builds, checks,
installs and smoke-tests both (scripts/release_check.py) and publishes both by trusted
publishing (an OIDC token, no stored secret); CI runs the same check on every change,
without the upload."""

import ast
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"


def _workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def _runtime_version() -> str:
    tree = ast.parse((REPO / "runtime" / "npu_runtime" / "__init__.py").read_text(encoding="utf-8"))
    (value,) = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", None) == "__version__" for t in n.targets)]
    return value


def test_one_version_for_both_distributions_and_the_pin():
    import tomllib

    import npu_migrate
    from npu_migrate.pipeline import runtime_bundle

    tool = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = tomllib.loads((REPO / "runtime" / "pyproject.toml").read_text())
    assert "version" not in tool["project"] and tool["project"]["dynamic"] == ["version"]
    assert tool["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "npu_migrate._runtime.__version__"}
    assert tool["tool"]["setuptools"]["package-dir"]["npu_migrate._runtime"] == "runtime/npu_runtime"
    assert runtime["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "npu_runtime.__version__"}
    version = _runtime_version()
    assert npu_migrate.__version__ == version
    assert runtime_bundle.requirement() == f"npu-runtime=={version}"


def test_the_release_workflow_checks_then_publishes_both_by_trusted_publishing():
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    assert "secrets." not in text and "password" not in text  # no stored token
    flow = _workflow("release.yml")
    assert flow["permissions"] == {"contents": "read"}
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    assert any("scripts/release_check.py" in step.get("run", "") for step in _steps(build))
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    uploads = [step for step in _steps(publish) if step.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert [step["with"]["packages-dir"] for step in uploads] == ["dist/npu_runtime/", "dist/npu_migrate/"]
    # only the publish job may mint an OIDC token
    assert [name for name, job in flow["jobs"].items() if "id-token" in job.get("permissions", {})] == ["publish"]


def test_ci_runs_everything_but_the_upload():
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    assert "gh-action-pypi-publish" not in text and "id-token" not in text
    flow = _workflow("ci.yml")
    runs = [step.get("run", "") for job in flow["jobs"].values() for step in _steps(job)]
    release_check = [run for run in runs if "scripts/release_check.py" in run]
    publish_check = [step.get("run", "") for step in _steps(_workflow("release.yml")["jobs"]["build"])
                     if "scripts/release_check.py --dist" in step.get("run", "")]
    assert release_check == publish_check  # the same check, the same flags
    assert any(re.search(r"\bbash \.ci/run\b", run) for run in runs)
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)


def test_the_release_check_reads_the_shared_version():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import release_check
    finally:
        sys.path.pop(0)
    assert release_check.shared_version() == _runtime_version()
