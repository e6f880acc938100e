"""The shell front end: ``*.sh``, ``*.bash`` and scripts with an sh/bash shebang
(and, through ``npu_migrate/dockerfile/``, the shell in Dockerfiles).

``engine.migrate`` is the entry point. Scripts are parsed by tree-sitter with
its bash grammar (``parser.py``); the rules in ``rules/shell/`` are visitors of
that tree (``rule.py``) and record edits at the byte offsets the parser reports,
so quoting, heredocs, comments, line continuations and every other byte stay as
they were. ``syntax.py`` has the helpers the rules share: literal values of
words and strings, command lines and their options.

Why tree-sitter and not bashlex: on 300 launch scripts from Megatron-LM,
DeepSpeedExamples, detectron2 and LLaMA-Factory, bashlex raised on 105 (it does
not implement arithmetic expansion, ``$#`` in some places, ``case`` patterns...)
while tree-sitter gave a tree for every file, with errors confined to the 15
files that bash rejects too or that use rare forms (``${A:$B+1}``), and the
error kept inside the one command that holds it. It also reports byte offsets
for every node, including inside strings and heredocs, and parses in C (0.04 s
for the 300 files against 0.47 s).
"""
