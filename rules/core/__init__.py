"""Rules that belong to the engine rather than to one family."""
