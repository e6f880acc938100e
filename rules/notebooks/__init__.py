"""Notebook rules: IPython's own lines in ``.ipynb`` code cells (``npu_migrate/notebooks/``).
The Python code of the cells goes through the Python rules, ``!`` lines through
the shell rules."""

FRONT_END = "notebook"
