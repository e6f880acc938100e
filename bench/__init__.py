"""Benchmarks and audits for npu-migrate (run from the repository root, see docs/benchmarks.md)."""
