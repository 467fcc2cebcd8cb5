"""For every test: the user's state directory (where the audit log lives by default) is a fresh one,
and `--demo` means a fresh demo of the command's own.

The dashboard reads the default audit log at start and acknowledges the unfinished actions it finds:
a test that builds an app (or runs `gputui clean`) without `--log` must never read, report or write
the real user's log.

`--demo` attaches to the user's live demo (gputui/cli/demod.py), started if none runs: a test must never
start or change the real user's demo, and needs the scenario's state as it starts, every time
(snapshots). GPUTUI_DEMO=fresh gives each command its own sims; tests of the live demo
(tests/cli/test_demo_live.py) unset it and give each test a runtime directory of its own.

And every test runs in a UTF-8 locale: where the environment has none (a CI box, as root, with no
LANG at all or LANG=C), the commands and the dashboard would be in ASCII mode (gputui/text/glyphs.py)
and every test that looks for `✓`, `…` or `·` would fail. There LANG=C.UTF-8, and an LC_ALL or
LC_CTYPE that would outrank it goes (Python's own LC_CTYPE=C.UTF-8 over no LANG included: it says
nothing of the terminal). A UTF-8 locale already there is left as it is: the tests run as the person
does. The tests of ASCII mode set their own locale (tests/cli/test_ascii_output.py).

The fuzz tests (hypothesis) draw new examples on each run by hand, so each run looks somewhere new.
CI runs the same examples every time (.ci/run sets GPUTUI_FUZZ=fixed): a submission does not land
or fail on the draw of one run. A case a run by hand finds is pinned with `@example`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from gputui.text.glyphs import shows_unicode

SLOW = Path(__file__).with_name("slow.txt")  # what `--quick` leaves out (scripts/slow-tests writes it)

# At import as well as in the fixture: an environment a test module copies when it is imported
# (before any fixture runs) must not start the user's live demo either.
os.environ["GPUTUI_DEMO"] = "fresh"

# Before any test module makes its settings (they start from the profile loaded then).
settings.register_profile("fixed", derandomize=True)
if os.environ.get("GPUTUI_FUZZ") == "fixed":
    settings.load_profile("fixed")

# At import too, for the same reason: the locale every test and every command it runs sees.
if not shows_unicode():
    os.environ.pop("LC_ALL", None)
    os.environ.pop("LC_CTYPE", None)
    os.environ["LANG"] = "C.UTF-8"


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("GPUTUI_DEMO", "fresh")
    return state


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help="leave out the tests listed in tests/slow.txt (0.5 s or more in a whole run): the day's loop",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--quick"):
        return
    slow = {
        line.strip() for line in SLOW.read_text().splitlines() if line.strip() and not line.startswith("#")
    }
    kept = [item for item in items if item.nodeid not in slow]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in slow])
        items[:] = kept
