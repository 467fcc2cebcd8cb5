"""`python -m gputui`: the same as the `gputui` command."""

from .cli.entry import entry

entry()
