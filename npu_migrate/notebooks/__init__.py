"""The notebook front end: Jupyter ``.ipynb`` files.

A notebook is read and validated with nbformat. Its code cells are migrated by
the Python engine as *one* module (``cells.py`` joins them with sentinel
statements between cells, so ``import torch`` in the first cell resolves
``torch.cuda`` in the tenth, and ``import torch_npu`` is added once, after the
first ``import torch``), with IPython's magics (``%``, ``%%``) and shell escapes
(``!``) held out as placeholders and put back afterwards; ``!`` lines and
``%%bash`` cells go to the shell front end when it is installed, and
``%env`` / ``%set_env`` lines are read by rule NPU870. Markdown cells and
outputs are never touched: only the JSON string values of changed code cells
are rewritten, in the file's own layout (``layout.py``).

Entry point: :func:`npu_migrate.notebooks.engine.migrate`.
"""
