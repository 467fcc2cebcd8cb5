"""The sim reader's scenario names, apart from the reader so the app's config can check a name
without importing the sim (its worker source and process machinery).

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

SCENARIOS = ("demo", "empty", "workers", "preflight", "mig", "mps", "jobs", "neighbour")
