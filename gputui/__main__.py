"""`python -m gputui`: the same as the `gputui` command."""

from .cli import entry

entry()
