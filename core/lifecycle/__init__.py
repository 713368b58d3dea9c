"""Lifecycle: memory files and hooks, weekly merge, monthly eviction, supersession, forgetting."""
