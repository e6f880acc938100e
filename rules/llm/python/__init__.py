"""LLM-stack rules for Python (and the code cells of notebooks)."""
