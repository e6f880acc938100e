"""The config-file front end: YAML (Hydra/OmegaConf included), JSON and TOML.

Each format has a reader that parses the file with a real parser and hands the
rules the same neutral view (:mod:`npu_migrate.configs.document`): every string
scalar with its value, the keys above it and the byte range of its text. Rules
(``rules/configs/``) record replacements of those byte ranges and findings; the
shared machinery (``npu_migrate/pipeline/edits.py``) applies them, so every byte outside
an edited scalar (comments, key order, quoting, indentation, line endings) is
kept by construction.

* YAML: PyYAML's composer (node marks give each scalar's position);
* JSON: tree-sitter's JSON grammar (byte positions; comments as in VS Code's
  JSONC files are accepted);
* TOML: tomlkit (positions found by swapping in unique markers and rendering).

Entry point: :func:`npu_migrate.configs.engine.migrate`.
"""
