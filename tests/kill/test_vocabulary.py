"""The kill flow's words are types: the wire's (the probe owns them: gputui.probe.common) as the
model types them, and the app's own beside them. The types and the probe's tuples are one list; and
a typo in a request's scope or a verdict's result fails `mypy --strict`, not a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

from gputui.kill.operate import AnyRequest, Request, RequestScope, SignalRequest
from gputui.kill.plan import SCOPES as PLAN_SCOPES
from gputui.model import NOT_SENT, OUTCOME_UNKNOWN, DoneResult, WireScope
from gputui.probe.common import DONE_RESULTS, SCOPE_SIGNAL, SCOPES

REPO = Path(__file__).resolve().parents[2]


def test_the_model_types_the_probes_words_and_no_others():
    assert set(get_args(WireScope)) == set(SCOPES)
    assert set(get_args(DoneResult)) == set(DONE_RESULTS) | {OUTCOME_UNKNOWN, NOT_SENT}
    assert set(get_args(RequestScope)) == set(SCOPES) | {"jobs"}
    assert set(PLAN_SCOPES) >= set(SCOPES) | {SCOPE_SIGNAL}


def test_requests_of_different_shapes_are_different_types():
    assert set(get_args(AnyRequest)) == {Request, SignalRequest}
    assert not set(Request.__slots__) & {"signal", "target"}
    assert set(SignalRequest.__slots__) == {"host", "signal", "target"}


def test_a_typo_in_a_scope_or_a_result_fails_mypy(tmp_path: Path) -> None:
    code = tmp_path / "typo.py"
    code.write_text(
        "from gputui.kill.operate import Request\n"
        "from gputui.model import done_event\n"
        'Request("h", "gpu")\n'
        'done_event("p", "outcome-unkown", "x")\n'
    )
    mypy = Path(sys.executable).parent / "mypy"
    result = subprocess.run(
        [
            str(mypy),
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(code),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert 'typo.py:3: error: Argument 2 to "Request"' in out, out
    assert 'typo.py:4: error: Argument 2 to "done_event"' in out, out
