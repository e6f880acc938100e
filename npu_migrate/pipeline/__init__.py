"""The shared migration pipeline every front end plugs into: configuration and
settings, discovery and file types, reading and atomic writing, the rule base and
registry, rule selection and suppression comments, text edits, the runner (workers,
limits) and its cache, project facts. See docs/layout.md.

It never imports the command line (``npu_migrate/cli/``) and imports a front end
only through :mod:`npu_migrate.pipeline.filetypes`, by name, when a file needs it.
"""
