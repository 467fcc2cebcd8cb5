"""The web page (gputui/serve/page) in a real browser (Chromium, by Playwright) against a real hub
(tests/serve/test_page.py `replay_hub`: aiohttp, Hub, Fleet over replayed hosts, on 127.0.0.1):
what an address or a host's text can do to it.

- An address whose `#token=` is not percent-encoding that can be read stopped the page's start (a
  URIError): it stayed at "connecting" for ever, and the token was left in the address bar.
- Long untrusted text without spaces (a host's name, its group, a GPU's model, a pod, a user, a job
  and a container) made the page wider than a phone's screen: each is wrapped, shown whole.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.browser import chromium_page
from tests.support.pagehub import demo_records, replay_hub, wait_for

pytestmark = pytest.mark.timeout(600)

NARROW = 360  # CSS pixels: a phone's width (the page is one column up to 600)
HOST = "gpu-" + "o" * 200 + ".example.org"
LONG = {"pod": "ml/" + "p" * 200, "model": "NVIDIA-" + "M" * 200, "user": "u" * 120,
        "job": "j" * 120, "container": "c" * 64}  # fmt: skip


def long_records() -> list[dict[str, Any]]:
    records = copy.deepcopy(demo_records())
    for record in records:
        if record["type"] == "sample":
            record["gpus"][0]["pod"] = LONG["pod"]
            record["gpus"][0]["name"] = LONG["model"]
            user = next(p for p in record["processes"] if p["kind"] == "user")
            user.update(user=LONG["user"], job=LONG["job"], container=LONG["container"])
    return records


def test_an_address_with_a_token_that_cannot_be_read_still_starts_the_page() -> None:
    with replay_hub({"gpu-a": demo_records()}, rate=20.0) as url, chromium_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/#token=abc%zz")
        wait_for(lambda: page.inner_text("#conn") == "live", "the page reads the hub")
        wait_for(lambda: page.locator("tr[data-pid]").count() > 0, "a holder shown")
        assert "token" not in page.url, page.url  # never left in the address bar
        assert not errors, errors


@pytest.mark.parametrize("width", [NARROW, 700])
def test_long_untrusted_text_is_wrapped_whole_at_a_phones_width(width: int) -> None:
    with (
        replay_hub({HOST: long_records()}, rate=20.0) as url,
        chromium_page(width=width, height=800) as page,
    ):
        page.goto(url + "/")
        wait_for(lambda: page.locator("tr[data-pid]").count() > 0, "the host's holders")
        wait_for(lambda: page.locator("#user-rows tr").count() > 0, "the users table")
        wait_for(lambda: page.locator("#problem-list .where").count() > 0, "a problem of the host")
        text = page.inner_text("body")
        for what, value in LONG.items():
            if width > 600 or what not in ("job", "container"):  # their column is left out at 600 or less
                assert value in text.replace("\n", ""), what
        wider = page.evaluate(
            """(width) => [...document.querySelectorAll('body *')]
                .filter((n) => !n.closest('[hidden]') && n.getClientRects().length
                    && n.getBoundingClientRect().right > width + 1)
                .map((n) => n.tagName + '.' + n.className)""",
            width,
        )
        assert wider == [], wider
        assert page.evaluate("document.documentElement.scrollWidth") <= width
