"""Hydra configuration: the schema (schema.py) and one config group per axis."""
