"""The Dockerfile front end: ``Dockerfile``, ``Dockerfile.*``, ``*.Dockerfile``,
``Containerfile``.

``engine.migrate`` is the entry point. The file is parsed by tree-sitter with
its Dockerfile grammar (instructions, continuation lines, comments inside
continued instructions, heredocs, exec-form JSON arrays, all with byte
offsets). The rules in ``rules/dockerfile/`` see the instructions (``FROM``
bases, ``ARG`` defaults); the shell parts go through the shell front end's rules
(``npu_migrate/shell/``) with the same ids as in launch scripts:

* ``RUN``, shell-form ``CMD`` and ``ENTRYPOINT``: the command, parsed by the bash
  grammar over exactly its fragments (tree-sitter's included ranges), so the
  comment lines Docker drops from a continued instruction are dropped here too
  and every offset is one of the Dockerfile; ``RUN <<EOF`` heredoc bodies are
  scripts of their own;
* ``ENV``: ``NAME=value`` pairs as shell assignments; in the legacy form
  ``ENV NAME value`` the name is a variable and the value a shell word.

Exec-form commands (``CMD ["python", "train.py", "--device", "cuda"]``) are read
as the same command line, at the same offsets. Not parsed as shell: everything
after a
``SHELL`` instruction naming another shell (PowerShell) or after an
``# escape=`` directive other than the backslash.
"""
