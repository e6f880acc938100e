"""The runtime's argparse commands read like npu-migrate's click commands (issue 27)."""

import pytest
from npu_runtime.diagnose import cli as diagnose_cli
from npu_runtime.preflight import cli as preflight_cli


@pytest.mark.parametrize(("module", "usage"), [
    (preflight_cli, "Usage: npu-migrate x [OPTIONS]\n"),
    (diagnose_cli, "Usage: npu-migrate x [OPTIONS] LOG...\n"),
])
def test_help_has_click_headings_examples_and_exit_codes(module, usage):
    text = module.parser("npu-migrate x").format_help()
    assert text.startswith(usage)
    assert "\nOptions:\n" in text and "\n  Examples:\n" in text and "\n  Exit codes:\n" in text
    assert "\noptions:\n" not in text and "usage:" not in text
    assert "\n  " + text.split("\n\n")[1].strip()[:20] in text  # the description is indented like click's


@pytest.mark.parametrize(("module", "args"), [(preflight_cli, []), (diagnose_cli, ["train.log"])])
def test_usage_error_is_clicks_shape_and_exits_2(module, args, capsys):
    with pytest.raises(SystemExit) as exc:
        module.parser("npu-migrate x").parse_args(["--no-such-option", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("Usage: npu-migrate x [OPTIONS]")
    assert "Try 'npu-migrate x --help' for help.\n\nError: " in err and "--no-such-option" in err
