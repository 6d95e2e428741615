"""The analytic checks, one module per model; each exposes `run(context) -> list[CheckResult]`
(deffuant_clusters is played by the bounded-confidence check, on its population)."""
