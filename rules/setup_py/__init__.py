"""``setup.py``: the literal ``install_requires`` / ``extras_require`` of a
``setup()`` call, read by Python rules (libcst) with the decisions of the
dependency-file rules (``npu_migrate/deps/pairing.py``, ``rules/deps/``).

setup.py is Python: it keeps every Python rule, the Python suppression comments
and positions, and only its requirement lists are read here. Lists built at run
time (read from a requirements file, computed) are not followed: the
requirements file is migrated by the deps front end itself.
"""
