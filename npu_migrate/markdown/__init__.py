"""Markdown front end: the shell commands in fenced code blocks, reported only."""
