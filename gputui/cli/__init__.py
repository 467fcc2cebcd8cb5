"""The command line: `gputui` and its commands (gputui.cli.main dispatches), each command in a module
of its own, the argument types and host/GPU/job specs they share, every exit code (exits.py), the
live demo (demo.py: its hosts; democtl.py: starting, attaching, stopping; demod.py: its daemon). The top layer: nothing below imports it.

Kept empty so that `gputui --version` and the quick commands import only what they use.
"""
