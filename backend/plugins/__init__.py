"""The manager's side of simulation plugins: what it serves about the installed ones (the
plugins themselves are found by populace.registry and never imported by name)."""
