"""`populace validate`: runs the built-in models through a manager and compares them with known
results (docs/validation.md)."""
