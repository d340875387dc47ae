"""The instrumented run: builds a model and its inputs, times each step's phases, writes records."""
