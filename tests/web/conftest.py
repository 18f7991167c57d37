"""The web console in a real browser: Debian's Chromium, headless, driven by Playwright,
against ``python -m local.server`` (what ``make dev`` runs) on a free port with its own
data folder, one per xdist worker (``pytest -n 2 tests/web``). Playwright's own browser
download is never used: the README's install step and ``.ci/run`` install ``chromium``
from the distribution."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import json
import os
from pathlib import Path
import shutil
import tempfile
import uuid

from playwright.sync_api import Browser, Page, Route, ViewportSize, expect, sync_playwright
import pytest

from local import template
from tests.e2e.conftest import Caller, DevServer, dev_process

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
SCREENSHOTS = template.ROOT / "docs" / "screenshots"
TAKEN = Path(tempfile.gettempdir()) / "recall-console-screenshots"
ALLOWED_ORIGIN = "http://console.example"
# Low, so a seeded thread crosses it in a few turns; the console learns it from the reply.
NUDGE_THRESHOLD_TURNS = 4
WAIT_MS = 15_000  # a busy CI machine; every wait ends as soon as its condition holds
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """make dev's server, shared by the browser tests of a session: under xdist, one per
    worker, each with its data in the worker's own temporary folder and on a port the
    server picked itself (``dev_process``), so two workers never meet."""
    environment = {
        "CORS_ALLOWED_ORIGINS": ALLOWED_ORIGIN,
        "NUDGE_THRESHOLD_TURNS": str(NUDGE_THRESHOLD_TURNS),
        "LOCAL_SCHEDULE_SECONDS": "0",
    }
    with dev_process(environment, tmp_path_factory.mktemp("console-data")) as server:
        yield server


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.fail("no Chromium: the README's install step runs apt-get install -y chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context at desktop width; a script error fails the test."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert errors == [], errors


@pytest.fixture
def user() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def api(console: DevServer) -> Callable[[str], Caller]:
    """Seeds through the HTTP API as any user."""

    def make(sub: str) -> Caller:
        return Caller(console.url, sub)

    return make


def sign_in(page: Page, console: DevServer, user: str) -> None:
    """Through the local sign-in form, as a person would."""
    page.goto(console.url + "/")
    page.get_by_label("Another name").fill(user)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector('body[data-ready="console"]')


def shoot(page: Page, name: str) -> None:
    """A screenshot for the README: rewritten in docs/screenshots/ with UPDATE_SCREENSHOTS=1
    (``make screenshots``), else taken into a temporary folder so a test run leaves the
    checkout clean (each run's user names and times differ)."""
    folder = SCREENSHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1" else TAKEN
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"))


def configure(page: Page, **settings: object) -> None:
    """Serve the page a config.js whose settings are overridden (short waits for a test)."""

    def serve(route: Route) -> None:
        answer = route.fetch()
        body = answer.text() + f"\nObject.assign(config, {json.dumps(settings)});\n"
        route.fulfill(response=answer, body=body)

    page.route("**/config.js", serve)
