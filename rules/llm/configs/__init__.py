"""LLM-stack rules for config files (YAML/JSON/TOML: TrainingArguments files,
DeepSpeed and accelerate configs)."""

FRONT_END = "config"
