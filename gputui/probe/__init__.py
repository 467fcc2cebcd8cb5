"""The probe: runs on a monitored host, reads GPUs and /proc, executes kill plans.

Everything in this package is stdlib (+ pynvml) and Python 3.8 syntax, because it is shipped over SSH
to hosts that have nothing else. It never imports from the rest of gputui.
"""

__version__ = "0.1.0"
