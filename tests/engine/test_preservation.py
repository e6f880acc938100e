"""Everything that is not rewritten stays byte-identical: comments, formatting,
quotes, encoding cookies, BOM, CRLF, file mode."""

from __future__ import annotations

import os
import stat

import pytest

from npu_migrate.python.engine import migrate_source

CUDA_LINE = "x = torch.cuda.device_count()"


def migrate(data: bytes) -> bytes:
    result = migrate_source("t.py", data)
    assert result.error is None, result.error
    assert result.new_source is not None
    return result.new_source


def test_crlf_is_preserved_including_inserted_lines():
    src = b"import torch\r\n# keep 'this' comment\r\nx = torch.cuda.device_count()  # trailing\r\n"
    out = migrate(src)
    assert out == b"import torch\r\nimport torch_npu  # noqa: F401\r\n# keep 'this' comment\r\nx = torch.npu.device_count()  # trailing\r\n"


def test_latin1_cookie_and_bytes_survive():
    src = "# -*- coding: latin-1 -*-\r\nimport torch\r\nname = 'caf\xe9'\r\nn = torch.cuda.device_count()\r\n".encode("latin-1")
    out = migrate(src)
    assert out.startswith(b"# -*- coding: latin-1 -*-\r\n")
    assert "name = 'caf\xe9'".encode("latin-1") in out
    assert b"torch.npu.device_count()" in out
    out.decode("latin-1")  # still latin-1, not re-encoded as utf-8
    assert b"\xc3\xa9" not in out


def test_utf8_bom_is_kept():
    src = b"\xef\xbb\xbfimport torch\nn = torch.cuda.device_count()\n"
    out = migrate(src)
    assert out.startswith(b"\xef\xbb\xbfimport torch\nimport torch_npu  # noqa: F401\n")


def test_formatting_quotes_and_comments_untouched():
    src = (
        b"import torch  # the framework\n\n\n"
        b"def f( a ,b ):   # odd spacing\n"
        b"    '''docstring mentions torch.cuda'''\n"
        b"    s = 'single'; t = \"double\"\n"
        b"    return torch.cuda.is_available( )\n"
    )
    out = migrate(src).decode()
    assert out == src.decode().replace("import torch  # the framework\n", "import torch  # the framework\nimport torch_npu  # noqa: F401\n").replace(
        "return torch.cuda.is_available( )", "return torch.npu.is_available( )"
    )


def test_no_cuda_relevance_means_untouched():
    src = b"import torch\nx = torch.zeros(3)\nprint('cuda is great')  # cuda\n"
    result = migrate_source("t.py", src)
    assert result.new_source is None and result.fixes == [] and result.error is None


def test_existing_torch_npu_import_is_not_duplicated():
    src = b"import torch\nimport torch_npu\nn = torch.cuda.device_count()\n"
    assert migrate(src).count(b"import torch_npu") == 1


def test_write_keeps_file_mode(tmp_path, run_cli):
    script = tmp_path / "train.py"
    script.write_bytes(b"import torch\nn = torch.cuda.device_count()\n")
    os.chmod(script, 0o751)
    result = run_cli("--write", script.name)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o751
    assert b"torch.npu.device_count()" in script.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".npu-migrate-")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_second_run_is_a_no_op(newline):
    src = newline.join([b"import torch", b"x = torch.cuda.current_device()", b""])
    once = migrate(src)
    again = migrate_source("t.py", once)
    assert again.new_source is None and again.fixes == []
