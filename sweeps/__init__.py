"""Sweep definitions and the planner that expands them.

Each definition is one yaml per question or published table.
"""
