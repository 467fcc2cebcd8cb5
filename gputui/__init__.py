"""gputui: live GPU holders across hosts, with staged kill-and-verify."""

from .probe import __version__

__all__ = ["__version__"]
