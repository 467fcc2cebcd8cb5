"""What the tests share: harnesses (real sshd servers, ptys, CUDA jobs, a hostile probe, the sim's
probes), hand-made samples and helpers that drive `gputui clean`, the reaper and the dashboard.

Test modules import from here, never from one another (tests/test_layers.py checks it); fixtures
live in the nearest conftest.py and take their parts from here.
"""
