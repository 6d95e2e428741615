"""The analytic checks, one module per model; each exposes `run(context) -> list[CheckResult]`."""
