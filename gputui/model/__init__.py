"""Typed records of what crosses the wire (docs/PROTOCOL.md), as the app sees them (one module for
now: gputui/model/samples.py, the old gputui/model.py, moved whole so its history follows)."""

from .samples import *  # noqa: F403
from .samples import GpuShare as GpuShare
from .samples import ProcUtilState as ProcUtilState
from .samples import __all__ as __all__
