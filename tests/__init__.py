"""gputui's tests, a package per layer of gputui/ (cli, kill, model, config, fleet, probe, transport,
ui; gpu for real GPUs), what they share in support/ (imported, never another test module), the
probe's recorded output in fixtures/. At the root, what spans the layers: test_layers (the import
contracts), test_bench_smoke (the benchmarks still run) and test_units (gputui/text/units.py, the bottom
floor that every other one uses).
"""
