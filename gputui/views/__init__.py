"""The fleet's state as its readers see it: problems ranked, filtered, as text, JSON and metrics.

problems (each host's and GPU's problems, ranked) uses filter (the fleet view's filter language);
report (what `snapshot` prints) and metrics (Prometheus families) read the fleet as it stands;
readiness (when a GPU is ready for the next run) is below them all. Importers name the module.
"""
