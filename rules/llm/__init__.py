"""The LLM training stack (NPU920-NPU949): Hugging Face transformers/accelerate
arguments, DeepSpeed and quantization/kernel libraries, in Python, shell
launchers, notebooks and config files. One sub-package per front end; the
facts and the repositories they were learnt from are in ``docs/llm-stack.md``."""

FRONT_END = None
