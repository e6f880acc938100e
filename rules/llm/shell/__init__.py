"""LLM-stack rules for shell launchers (and notebooks' `!` lines, Dockerfile RUN)."""

FRONT_END = "shell"
