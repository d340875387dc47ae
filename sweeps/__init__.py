"""Sweep definitions (one yaml per question or published table) and the planner that expands them."""
