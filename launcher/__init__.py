"""Hands a plan's runs to submitit and follows them to the end."""
