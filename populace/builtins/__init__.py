"""The simulations that ship with populace, registered under the entry-point group
`populace.simulations` like any user's (pyproject.toml), through `populace.plugin` only."""
