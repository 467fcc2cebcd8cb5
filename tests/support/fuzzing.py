"""Hypothesis settings for the fuzz tests of what reads untrusted text (the wire decoder, the config's
parsers): example counts moderate for a 2-core CI box, no example database written."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_FUZZ = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
