"""The numbers the views rest on: pure functions of measured times.

Nothing here renders a view or reads a sweep's folder.
"""
