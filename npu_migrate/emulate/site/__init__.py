# Package marker so that setuptools ships the stand-in ``torch_npu`` below.
# This directory is put on PYTHONPATH only by ``npu-migrate emulate``; never
# import anything from here directly.
