"""populace's public plugin interface (`populace.plugin`) and the built-in simulations written
with it (`populace.builtins`). A plugin imports `populace.plugin` and nothing else of populace."""
