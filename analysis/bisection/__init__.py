"""Bisection: the search for the release or commit that first shows a change (search.py), its record in the
bisect's folder (store.py), and its words and table (view.py)."""
