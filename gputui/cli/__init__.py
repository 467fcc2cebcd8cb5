"""The command line, in pip's model: `main` (the registry's dispatch, gputui/cli/main.py) over
`commands/` (one module a command: its options and its run, loaded only when it runs) over the
machinery they run and share: the shared options (options.py), every exit status (exits.py), the
hosts and their fleet (fleets.py; judging.py: the fleet of a command that only looks), argument types and host/GPU/job specs, guarded output, the live
demo (demo.py: its hosts; democtl.py: starting, attaching, stopping; demod.py: its daemon). The top
layer of gputui: nothing below imports it; inside, the "CLI layers" contract (pyproject.toml) keeps
each floor from importing the ones above it.

Kept empty so that `gputui --version` and the quick commands import only what they use.
"""
