"""Errors the CLI turns into one line on stderr and exit code 2."""


class UsageError(Exception):
    """Bad input from the operator: one line, exit code 2."""
