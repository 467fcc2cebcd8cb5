"""Transports connect the app to probes: `local` (a subprocess) and `ssh` (asyncssh)."""
