"""NPU001: suppression comments whose codes name no rule."""

from npu_migrate.python.rule import Example, Rule


class InvalidSuppression(Rule):
    id = "NPU001"
    name = "invalid-suppression"
    summary = "Report codes in `# npu-migrate: ignore[...]` and `# noqa: NPU...` comments that name no rule"
    fixable = False
    rationale = """
A suppression comment with a mistyped code (`ignore[NPU1O1]`, `noqa: NPU9999`)
silently suppresses nothing, and the fix or finding it was meant for comes back
on every run. Each code that is neither a rule id nor the prefix of one is
reported on the comment itself, like ruff's invalid-noqa report.

Accepted forms: `# npu-migrate: ignore` (every rule on that line),
`# npu-migrate: ignore[NPU101,NPU2]` (those codes and prefixes), and
`# noqa: NPU101` with NPU codes among other linters' codes (`# noqa: E501, NPU101`).
A bare `# noqa` suppresses nothing here: it was written for another linter,
and leaving CUDA code unmigrated because of it would be silent. Ruff users can
keep ruff from calling NPU codes unknown with `lint.external = ["NPU"]`.

This rule has no visitor: the engine reads the comments itself.
"""
    examples = (
        Example("x = torch.cuda.device_count()  # npu-migrate: ignore[NPU1O1]\n"),
        Example("x = torch.cuda.device_count()  # noqa: E501, NPU101\n"),
    )
