"""The commands of the command line: a sweep, repeats=auto, bisect, envs and the views.

Each is a module; cli.py parses the words and picks one.
"""
