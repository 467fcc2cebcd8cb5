"""`python -m gputui`: the same as the `gputui` command."""

from .cli.main import entry

entry()
