"""Interviews: a free-form question put to one agent about a run, answered by the run's LLM in
the agent's character (its worker writes the prompt), streamed, and kept with the run."""
