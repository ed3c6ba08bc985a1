"""`python -m kb`."""

from kb.cli import program

program()
