"""Cluster-stack rules for config files (docker-compose, devcontainer.json)."""

FRONT_END = "config"
