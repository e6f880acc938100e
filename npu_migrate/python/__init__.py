"""The Python front end: migrates ``.py`` files (and notebook code cells) with
libcst. ``engine.migrate_source`` is its entry point; rules in ``rules/`` are
libcst visitors built on :class:`npu_migrate.python.rule.Rule`.

Nothing here imports torch.
"""
