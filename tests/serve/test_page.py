"""The web page (gputui/serve/page) in a real browser (Chromium, by Playwright) against a real
`gputui serve --demo` on the test's own live demo (a private runtime directory: `gputui clean` on
the same demo is seen by the hub), on 127.0.0.1 and a free port, ended by its PID.

It shows every host and a holder PID; a `gputui clean` on the demo leaves the page; the filter
narrows (and says why it cannot read a filter, as the dashboard does); a process whose name and
command line are markup is shown literally and runs nothing; with tokens, the page asks for one and
reads the hub with it (from the form, or from the address's #token=)."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium_page
from tests.support.livedemo import Live, snapshot
from tests.support.pagehub import demo_records, replay_hub, wait_for

pytestmark = pytest.mark.timeout(600)

SERVING = re.compile(r"serving (http://127\.0\.0\.1:\d+)/")
HOSTILE_NAME = "<b>x</b>"  # the comm (15 bytes at most)
HOSTILE_ARGS = ["<img src=x onerror=window.__pwned=1>", "<script>window.__pwned=2</script>"]


class Hub:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url


def start_hub(demo: Live, *args: str) -> Hub:
    """`gputui serve --demo` on a free loopback port; its URL read from what it says on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "serve", "--demo", "--listen", "127.0.0.1:0", *args],
        env=demo.env,
        cwd=demo.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # ends when the hub exits
        said.append(line)
        found = SERVING.search(line)
        if found:
            return Hub(proc, found.group(1))
    proc.wait(timeout=60)
    raise AssertionError("gputui serve said no address: " + "".join(said))


def stop_hub(hub: Hub) -> None:
    if hub.proc.poll() is None:
        hub.proc.send_signal(signal.SIGTERM)
        try:
            hub.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            hub.proc.kill()
            hub.proc.wait(timeout=60)


@pytest.fixture
def hub(live: Live) -> Iterator[tuple[Live, Hub]]:
    started = start_hub(live)
    try:
        yield live, started
    finally:
        stop_hub(started)


def pids_shown(page: Any, host: str) -> set[int]:
    return set(
        page.eval_on_selector_all(
            f'article.host[data-host="{host}"] tr[data-pid]', "ns => ns.map(n => +n.dataset.pid)"
        )
    )


def shown_hosts(page: Any) -> list[str]:
    return list(page.eval_on_selector_all("article.host:not([hidden])", "ns => ns.map(n => n.dataset.host)"))


def test_the_page_shows_the_demo_and_follows_a_clean(hub: tuple[Live, Hub]) -> None:
    demo, server = hub
    doc = snapshot(demo)
    hosts = [h["name"] for h in doc["hosts"]]
    with chromium_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        wait_for(lambda: shown_hosts(page) == hosts, f"every host, in order: {hosts}")
        on_gpu0 = {
            p["pid"] for h in doc["hosts"] if h["name"] == "demo-a" for p in h["processes"] if 0 in p["gpus"]
        }
        wait_for(lambda: on_gpu0 & pids_shown(page, "demo-a"), "a holder of demo-a's GPU 0 by its PID")
        assert page.locator("#problem-list li.problem").count() >= 1  # the demo's ghosts
        wait_for(lambda: page.locator("#user-rows tr").count() >= 1, "the users (summed once a second)")

        cleaned = demo.gputui("clean", "--demo", "demo-a:0", "--yes")
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        gone = on_gpu0 - {
            p for h in snapshot(demo, "demo-a")["hosts"] for p in (q["pid"] for q in h["processes"])
        }
        assert gone
        wait_for(lambda: not (gone & pids_shown(page, "demo-a")), f"the cleaned PIDs {gone} leave the page")
        assert not errors


def test_the_filter_narrows_and_says_why_it_cannot_read(hub: tuple[Live, Hub]) -> None:
    _, server = hub
    with chromium_page(width=390, height=800) as page:
        page.goto(server.url + "/")
        wait_for(lambda: len(shown_hosts(page)) == 2, "both demo hosts")
        page.fill("#filter", "host:demo-b")
        wait_for(lambda: shown_hosts(page) == ["demo-b"], "host:demo-b leaves demo-b")
        page.fill("#filter", "state:ghost")  # a GPU's state: the GPUs with a ghost's memory
        wait_for(lambda: page.locator("div.gpu").count() == 2, "one GPU with a ghost on each host")
        page.fill("#filter", "kind:ghost")  # a GPU with a ghost, and of its processes the ghost
        wait_for(lambda: page.locator("tr.kind-ghost").count() == 2, "the two ghosts")
        assert page.locator("tr.kind-user").count() == 0
        page.fill("#filter", "usr:root")
        wait_for(
            lambda: "did you mean user:?" in page.inner_text("#filter-error"), "the dashboard's sentence"
        )
        assert page.get_attribute("#filter", "aria-invalid") == "true"
        page.fill("#filter", "mem>40G")
        wait_for(lambda: page.inner_text("#filter-error") == "", "a filter that reads clears the error")


def hostile_holder(demo: Live, tmp: Path) -> subprocess.Popen[bytes]:
    """A real process on the demo's "driver" (its device file open: a hidden holder) named as markup."""
    (device,) = sorted(demo.demo_dir.rglob("dev/nvidia0"))[:1]
    code = (
        "import sys, time\n"
        f"open('/proc/self/comm', 'w').write({HOSTILE_NAME!r})\n"
        "held = open(sys.argv[1], 'rb')\n"
        "time.sleep(600)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(device), *HOSTILE_ARGS], cwd=tmp)


def test_markup_from_a_host_is_shown_literally_and_runs_nothing(
    hub: tuple[Live, Hub], tmp_path: Path
) -> None:
    demo, server = hub
    holder = hostile_holder(demo, tmp_path)
    try:
        with chromium_page() as page:
            dialogs: list[str] = []

            def on_dialog(dialog: Any) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto(server.url + "/")
            row = f'tr[data-pid="{holder.pid}"]'
            wait_for(lambda: page.locator(row).count() >= 1, "the hostile holder's row")
            text = page.inner_text(row)
            assert HOSTILE_ARGS[0] in text and HOSTILE_ARGS[1] in text
            assert page.locator("img, script:not([src]), b").count() == 0  # no element made of it
            assert page.evaluate("window.__pwned") is None
            page.fill("#filter", f'"{HOSTILE_NAME}"')  # the name is searchable text
            wait_for(lambda: page.locator(row).count() >= 1, "the filter finds the name as text")
            assert not dialogs
    finally:
        holder.kill()
        holder.wait(timeout=60)


def test_a_hub_with_tokens_asks_for_one(live: Live, tmp_path: Path) -> None:
    made = live.gputui("serve", "--new-token", "lead")
    assert made.returncode == 0, made.stderr
    token, line = _token_and_line(made.stdout + made.stderr)
    tokens = tmp_path / "tokens"
    tokens.write_text(line + "\n")
    os.chmod(tokens, 0o600)
    server = start_hub(live, "--tokens", str(tokens))
    try:
        with chromium_page() as page:
            page.goto(server.url + "/")
            wait_for(lambda: page.is_visible("#token-box"), "the token form")
            assert page.locator("article.host").count() == 0
            page.fill("#token", "not-the-token")
            page.click("#token-form button")
            wait_for(lambda: page.is_visible("#token-box"), "a wrong token is refused")
            page.fill("#token", token)
            page.click("#token-form button")
            wait_for(lambda: page.locator("article.host").count() == 2, "the hosts, with the token")
        with chromium_page() as page:  # a link that carries it: taken, and not left in the address
            page.goto(server.url + "/#token=" + token)
            wait_for(lambda: page.locator("article.host").count() == 2, "the hosts, with #token=")
            assert "token" not in page.url
    finally:
        stop_hub(server)


def _token_and_line(said: str) -> tuple[str, str]:
    """The token and the tokens-file line `serve --new-token` printed (the token on the line after
    the one that names it)."""
    lines = [x.strip() for x in said.splitlines()]
    token = lines[next(i for i, x in enumerate(lines) if x.startswith("token for lead")) + 1]
    line = next(x for x in lines if re.fullmatch(r"lead viewer [0-9a-f]{64}", x))
    return token, line


# -- a large fleet: a hub of replayed hosts (the serve package on a loop of its own, in a thread) --


def test_a_large_fleet_is_drawn_where_it_is_seen_and_filtered_whole() -> None:
    """300 hosts: the cards on screen are drawn and the ones far below are not built until scrolled
    to (the page builds what is seen, whatever the fleet's size); the filter finds a host far down
    the list, counts over the whole fleet, and clearing it brings every host back."""
    records = demo_records()
    names = [f"h{i:03d}" for i in range(300)]
    with replay_hub({name: records for name in names}) as url, chromium_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        wait_for(lambda: page.inner_text("#host-count") == "300", "every host counted")
        wait_for(lambda: page.locator('article[data-host="h000"] tr[data-pid]').count() > 0, "h000 drawn")
        assert len(page.eval_on_selector_all("article.host", "ns => ns.map(n => n.dataset.host)")) == 300
        last = 'article[data-host="h299"]'
        assert page.locator(last + " div.gpu").count() == 0  # far below: its name only, for now

        def scrolled_to() -> bool:
            # Scrolled to again while it is not drawn: on a busy machine cards above it may still be
            # growing as their first frames arrive, moving it out of the view once more.
            page.locator(last).scroll_into_view_if_needed()
            return page.locator(last + " tr[data-pid]").count() > 0

        wait_for(scrolled_to, "h299 drawn once scrolled to")
        page.evaluate("window.scrollTo(0, 0)")

        page.fill("#filter", "host:h29*")
        wait_for(lambda: page.inner_text("#host-count") == "10 of 300", "the count over the whole fleet")
        wait_for(lambda: shown_hosts(page) == names[290:], "the hosts far down the list, and only they")
        wait_for(lambda: page.locator(last + " tr[data-pid]").count() > 0, "a matched host drawn")
        page.fill("#filter", "")
        wait_for(lambda: page.inner_text("#host-count") == "300", "every host again")
        assert len(shown_hosts(page)) == 300
        assert not errors


HOSTILE_EVENT = "GPU 0 clean <img src=x onerror=window.__pwned=3>\x1b[31m"
LONG_ARGS = [
    "/srv/very/long/path/to/some/virtual/env/bin/python3",
    "-u",
    "/tmp/gputui-sim-abcdef12/bin/train.py",
]


def dressed_records() -> list[dict[str, Any]]:
    """demo-a's records with GPU 0 in a pod, its first user process given a long command line
    (interpreter and script by absolute paths), and a plan's start, a working step and its verdict
    after the first sample (a plan a hostile probe words as markup)."""
    records = copy.deepcopy(demo_records())
    for record in records:
        if record["type"] == "sample":
            record["gpus"][0]["pod"] = "ml-team/llama-train-0"
            user = next(p for p in record["processes"] if p["kind"] == "user")
            user["command"] = [*LONG_ARGS, "--lr", "3e-4"]
    first = next(i for i, r in enumerate(records) if r["type"] == "sample")
    event = {"type": "event", "v": 1, "plan": "p7", "time": records[first]["time"], "pid": None,
             "start_time": None, "signal": None, "data": {}}  # fmt: skip
    steps = [
        dict(event, stage="accepted", result="accepted", gpu=None, message="clean GPU 0"),
        dict(event, stage="signal", result="sent", gpu=None, message="SIGTERM -> 4121"),
        dict(event, stage="verdict", result="clean", gpu=0, message=HOSTILE_EVENT),
    ]
    return [*records[: first + 1], *steps, *records[first + 1 :]]


def test_commands_as_the_dashboard_shows_them_a_plans_actions_and_a_gpus_pod() -> None:
    """A command line reads as the dashboard's process table shows it (`python3 -u .../train.py`:
    the interpreter's and the script's paths are noise), the whole line kept as the row's tooltip;
    a plan's start and verdict are in the actions strip (not its working steps), its hostile message
    shown literally with the escape character escaped; a GPU in a pod says so."""
    with replay_hub({"gpu-a": dressed_records()}, rate=20.0) as url, chromium_page() as page:
        page.goto(url + "/")
        cell = page.locator('article[data-host="gpu-a"] tr[data-pid] td:last-child', has_text="train.py")
        wait_for(lambda: cell.count() > 0, "the long command's row")
        shown = cell.first.inner_text()
        assert shown.startswith("python3 -u .../train.py --lr 3e-4"), shown
        assert cell.first.get_attribute("title") == " ".join([*LONG_ARGS, "--lr", "3e-4"])
        assert page.evaluate("gputuiPage.briefCommand(['/usr/bin/python', '/short/x.py', '/'])") == (
            "python /short/x.py /"
        )
        wait_for(lambda: page.locator("#action-list li").count() >= 2, "the plan's start and verdict")
        assert page.is_visible("#actions")
        actions = page.inner_text("#action-list")
        assert "started" in actions and "verdict clean" in actions and "SIGTERM" not in actions
        assert "GPU 0 clean <img src=x onerror=window.__pwned=3>\\e[31m" in actions
        assert page.locator("img").count() == 0 and page.evaluate("window.__pwned") is None
        pod = page.locator('article[data-host="gpu-a"] div.gpu[data-gpu="0"] .gpu-pod')
        wait_for(lambda: pod.count() == 1, "GPU 0's pod")
        assert pod.inner_text() == "pod ml-team/llama-train-0"


def test_the_page_has_its_files_in_the_wheel(tmp_path: Path) -> None:
    """The page ships as package data: every file of gputui/serve/page is in the built wheel."""
    built = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    page = Path(__file__).resolve().parents[2] / "gputui" / "serve" / "page"
    for name in ("index.html", "app.js", "app.css", "filter.js"):
        assert (page / name).is_file()
        assert f"gputui/serve/page/{name}" in names, json.dumps(sorted(n for n in names if "serve" in n))
