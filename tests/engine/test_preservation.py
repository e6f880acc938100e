"""Everything that is not rewritten stays byte-identical: comments, formatting,
quotes, encoding cookies, BOM, CRLF, file mode."""

from __future__ import annotations

import os
import stat

import pytest

from npu_migrate.python.engine import migrate_source
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text
from tests.rules.golden import cases, real_name

CUDA_LINE = "x = torch.cuda.device_count()"


def migrate(data: bytes) -> bytes:
    result = migrate_source("t.py", data)
    assert result.error is None, result.error
    assert result.new_source is not None
    return result.new_source


def test_crlf_is_preserved_including_inserted_lines():
    src = b"import torch\r\n# keep 'this' comment\r\nx = torch.cuda.device_count()  # trailing\r\n"
    out = migrate(src)
    assert out == b"import torch\r\n\r\ntry:\r\n    import torch_npu  # noqa: F401\r\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r\n    torch.npu = torch.cuda\r\n\r\n# keep 'this' comment\r\nx = torch.npu.device_count()  # trailing\r\n"


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
    assert out.startswith(b"\xef\xbb\xbfimport torch\n\n" + guard_text(fallback=(NPU_IS_CUDA,)).encode() + b"\n")


def test_formatting_quotes_and_comments_untouched():
    src = (
        b"import torch  # the framework\n\n\n"
        b"def f( a ,b ):   # odd spacing\n"
        b"    '''docstring mentions torch.cuda'''\n"
        b"    s = 'single'; t = \"double\"\n"
        b"    return torch.cuda.is_available( )\n"
    )
    out = migrate(src).decode()
    assert out == src.decode().replace("import torch  # the framework\n", "import torch  # the framework\n\n" + guard_text(fallback=(NPU_IS_CUDA,))).replace(
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


#: (original, migrated) pairs where libcst alone would lose bytes: a form feed in the
#: indentation of a statement (it writes the block's indentation instead), and the
#: last line ending of a CR-only file.
LOSSY_FOR_LIBCST = [
    (b'import torch\nx = 1\n\x0cy = torch.zeros(1).cuda()\n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\nx = 1\n\x0cy = torch.zeros(1).npu()\n'),
    (b'import torch\n\x0c\n\x0cdef f():\n    return torch.zeros(1).cuda()\n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\x0c\n\x0cdef f():\n    return torch.zeros(1).npu()\n'),
    (b'import torch\nif x:\n    a = 1\n\x0c    b = torch.zeros(1).cuda()\n  \x0c  \x0cc = 2\n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\nif x:\n    a = 1\n\x0c    b = torch.zeros(1).npu()\n  \x0c  \x0cc = 2\n'),
    (b'import torch\nclass A:\n    def f(self):\n        pass\n\x0c\n\x0c    def g(self):\n        return torch.zeros(1).cuda()\n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\n\nclass A:\n    def f(self):\n        pass\n\x0c\n\x0c    def g(self):\n        return torch.zeros(1).npu()\n'),
    (b'\x0cimport torch\r\n\x0cx = torch.zeros(1).cuda()\r\n',
     b'\x0cimport torch\r\n\r\ntry:\r\n    import torch_npu  # noqa: F401\r\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r\n    pass\r\n\r\n\x0cx = torch.zeros(1).npu()\r\n'),
    (b'import torch\rx = torch.zeros(1).cuda()\r',
     b'import torch\r\rtry:\r    import torch_npu  # noqa: F401\rexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r    pass\r\rx = torch.zeros(1).npu()\r'),
    (b'import torch\rx = torch.zeros(1).cuda()\r\r\r',
     b'import torch\r\rtry:\r    import torch_npu  # noqa: F401\rexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r    pass\r\rx = torch.zeros(1).npu()\r\r\r'),
    (b'import torch\r\x0cx = torch.zeros(1).cuda()\r',
     b'import torch\r\rtry:\r    import torch_npu  # noqa: F401\rexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r    pass\r\r\x0cx = torch.zeros(1).npu()\r'),
    # A statement the migration removes (an import nothing uses any more): its form feed
    # goes in front of the line that follows it.
    (b'import torch\n\x0cfrom torch import cuda\n\x0cs = cuda.amp.GradScaler()\n',
     b'import torch\n\ntry:\n\x0c    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\n\x0cs = torch.amp.GradScaler("npu")\n'),
    # Blank lines holding spaces at the end of the file (ai-toolkit's scripts end in
    # eleven, the last without a line ending): libcst gave back one.
    (b'import torch\nx = torch.zeros(1).cuda()\n        \n    \n    ',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\nx = torch.zeros(1).npu()\n        \n    \n    '),
    (b'import torch\ndef f():\n    return torch.zeros(1).cuda()\n  \n\t\n# end\n  \n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\n\ndef f():\n    return torch.zeros(1).npu()\n  \n\t\n# end\n  \n'),
    # Form feeds inside brackets and strings were never lost, and stay as they are.
    (b'import torch\nx = (1,\n\x0c2)\ns = """\n\x0ca"""\ny = torch.zeros(1).cuda()\n',
     b'import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    pass\n\nx = (1,\n\x0c2)\ns = """\n\x0ca"""\ny = torch.zeros(1).npu()\n'),
]


@pytest.mark.parametrize(("src", "expected"), LOSSY_FOR_LIBCST)
@pytest.mark.parametrize("prefilter", [True, False], ids=["elided", "whole-file"])
def test_bytes_libcst_drops_are_kept(src, expected, prefilter):
    from npu_migrate.pipeline.settings import Settings

    result = migrate_source("t.py", src, Settings(prefilter=prefilter))
    assert result.error is None, result.error
    assert result.new_source == expected
    assert migrate_source("t.py", expected, Settings(prefilter=prefilter)).new_source is None  # idempotent


def test_form_feed_positions_are_those_of_the_original_lines():
    result = migrate_source("t.py", b"import torch\nx = 1\n\fy = torch.zeros(1).cuda()\n")
    assert [(f.rule, f.line) for f in result.fixes] == [("NPU100", 1), ("NPU103", 3)]


def _feed_every_statement(source: bytes) -> bytes:
    """``source`` with a form feed in front of every module-level statement."""
    import ast

    from npu_migrate.python.elision import first_line

    starts = {first_line(node) - 1 for node in ast.parse(source).body}
    lines = source.splitlines(keepends=True)
    return b"".join(b"\f" + line if number in starts else line for number, line in enumerate(lines))


@pytest.mark.parametrize("case", [c for c in cases() if c.before.suffix == ".py"], ids=lambda c: c.id)
def test_form_feeds_before_statements_survive_every_fixture(case):
    """A form feed before each statement changes nothing about the migration, and survives it."""
    fed = _feed_every_statement(case.before.read_bytes())
    result = migrate_source(real_name(case.before), fed, case.settings())  # the name it stands for
    assert result.error is None, result.error
    if case.after is None:
        assert result.new_source is None
    else:
        assert result.new_source.count(b"\f") == fed.count(b"\f")
        assert result.new_source.replace(b"\f", b"") == case.after.read_bytes().replace(b"\f", b"")


@pytest.mark.parametrize("case", [c for c in cases() if c.before.suffix == ".py"], ids=lambda c: c.id)
def test_blank_lines_with_spaces_at_the_end_survive_every_fixture(case):
    """Trailing blank lines that hold spaces (which libcst alone shortens) change nothing
    about the migration, and are all still there after it."""
    tail = b"        \n    \n\t\n    "
    before = case.before.read_bytes()
    result = migrate_source(real_name(case.before), before + tail, case.settings())
    assert result.error is None, result.error
    if case.after is None:
        assert result.new_source is None
    else:
        assert result.new_source == case.after.read_bytes() + tail
