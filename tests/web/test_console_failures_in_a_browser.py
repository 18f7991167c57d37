"""The console when the API or the network lets it down, or a link asks too much: a socket
address on another host, a token that expires, a first load that fails, an import whose
progress cannot be read. Each test signs in as its own user against make dev's server."""

from __future__ import annotations

import base64
from collections.abc import Callable
import json
import re

from playwright.sync_api import Page, Route, WebSocket, expect
import pytest

from local.tokens import demo_token
from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import TAKEN, configure, shoot, sign_in
from tests.web.helpers import composer, open_thread, seed_project, seed_turns

pytestmark = pytest.mark.e2e


def sockets_opened(page: Page) -> list[str]:
    opened: list[str] = []

    def seen(socket: WebSocket) -> None:
        opened.append(socket.url)

    page.on("websocket", seen)
    return opened


def test_a_link_naming_a_websocket_on_another_host_is_refused_and_the_page_says_so(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a link whose ?ws= names a listener that is not the API's host
    seed_project(api(user))
    opened = sockets_opened(page)
    page.goto(f"{console.url}/?ws=ws://127.0.0.1:9/collect")
    # Then the sign-in page says the socket is not used
    expect(page.locator("#ws-refused")).to_contain_text("ws://127.0.0.1:9/collect")
    expect(page.locator("#ws-refused")).to_contain_text("not on the API's host")
    page.screenshot(path=str(TAKEN / "ws-refused-sign-in.png"))
    # When someone signs in and sends a message
    page.get_by_label("Another name").fill(user)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector('body[data-ready="console"]')
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then the reply comes whole over HTTP, and no socket went to the other host
    reply = page.locator('.message.assistant[data-status="complete"]')
    expect(reply).to_have_attribute("data-transport", "whole")
    expect(page.locator("#transport")).to_contain_text("Streaming off")
    assert opened == []


def test_a_link_naming_the_apis_own_websocket_still_streams(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a link whose ?ws= is the API's own host
    seed_project(api(user))
    opened = sockets_opened(page)
    own = console.url.replace("http", "ws") + "/ws"
    page.goto(f"{console.url}/?ws={own}")
    expect(page.locator("#ws-refused")).to_be_hidden()
    page.get_by_label("Another name").fill(user)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector('body[data-ready="console"]')
    # When
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then it streams there
    reply = page.locator('.message.assistant[data-status="complete"]')
    expect(reply).to_have_attribute("data-transport", "stream")
    assert opened and all(url.startswith(own) for url in opened)


def serve_the_api_over_https(page: Page, console: DevServer, origin: str) -> None:
    """Answers ``origin`` (an https address no test can serve) from make dev's server, as an
    API deployed behind TLS would."""

    def forward(route: Route) -> None:
        answer = route.fetch(url=console.url + route.request.url.removeprefix(origin))
        headers = {**answer.headers, "access-control-allow-origin": "*"}
        route.fulfill(response=answer, headers=headers)

    page.route(f"{origin}/**", forward)


def test_a_link_naming_a_cleartext_websocket_for_an_https_api_is_refused(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an API served over https, and a link whose ?ws= is ws: on that API's own host
    seed_project(api(user))
    https_api = "https://api.example"
    serve_the_api_over_https(page, console, https_api)
    opened = sockets_opened(page)
    page.goto(f"{console.url}/?api={https_api}&ws=ws://api.example/ws")
    # Then the sign-in page says the socket is not used, and why
    refused = page.locator("#ws-refused")
    expect(refused).to_contain_text("ws://api.example/ws")
    expect(refused).to_contain_text("not encrypted")
    shoot(page, "ws-cleartext-refused")
    # When someone signs in with a token and sends a message
    page.locator("#sign-in-jwt").fill(demo_token(user))
    page.get_by_role("button", name="Use this token").click()
    page.wait_for_selector('body[data-ready="console"]')
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then the reply comes whole over HTTP, and no socket was opened to send the token on
    reply = page.locator('.message.assistant[data-status="complete"]')
    expect(reply).to_have_attribute("data-transport", "whole")
    expect(page.locator("#transport")).to_contain_text("Streaming off")
    assert opened == []
    # The lists read again after the turn may still be on their way when the page closes
    page.unroute_all(behavior="ignoreErrors")


def expired_token(sub: str) -> str:
    return ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in ({"alg": "HS256", "typ": "JWT"}, {"sub": sub, "exp": 1}, "x")
    )


def expire_the_session(page: Page, user: str) -> None:
    """The token the page holds is now one the API answers 401 (its exp has passed)."""
    page.evaluate("token => sessionStorage.setItem('recall.token', token)", expired_token(user))


def expect_back_at_sign_in(page: Page) -> None:
    expect(page.locator("#session-ended")).to_have_text("Your session ended; sign in again.")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#console")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('recall.token')") is None


def test_a_session_that_ends_mid_way_returns_to_sign_in_saying_so(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a signed-in page with a thread
    owner = api(user)
    seed_turns(owner, seed_project(owner), ["Plan the spring sale"])
    sign_in(page, console, user)
    # When the token expires and a thread is opened
    expire_the_session(page, user)
    page.locator(".thread").first.click()
    # Then the page is back at sign-in, saying why
    expect_back_at_sign_in(page)
    page.screenshot(path=str(TAKEN / "session-ended.png"))
    # When the person signs in again, the notice goes
    sign_in(page, console, user)
    expect(page.locator("#session-ended")).to_be_hidden()
    expect(page.locator(".thread")).to_have_count(1)


def end_the_session_mid_draft(page: Page, user: str, thread_title: str, draft: str) -> None:
    """With ``thread_title`` open and ``draft`` typed, the token expires and the page's next
    request (the memory panel's Refresh) is answered 401."""
    open_thread(page, thread_title)
    composer(page).fill(draft)
    expire_the_session(page, user)
    page.locator("#refresh-memory").click()
    expect_back_at_sign_in(page)


def resume_entry(page: Page) -> object:
    return page.evaluate("JSON.parse(localStorage.getItem('recall.resume'))")


def test_signing_in_again_after_the_session_ended_gives_back_the_thread_and_the_draft(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a signed-in page with an older thread open and a message half typed
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, ["The older thread"])
    seed_turns(owner, project, ["The newer thread"])
    sign_in(page, console, user)
    # When the session ends
    end_the_session_mid_draft(page, user, "The older thread", "Half a thought about")
    # Then what was open and typed waits, with whose it is
    resume = resume_entry(page)
    assert isinstance(resume, dict) and resume["user"] == user
    assert resume["draft"] == "Half a thought about"
    # When the same person signs in again
    sign_in(page, console, user)
    # Then the thread is open again with the draft in the box, and the entry is gone
    expect(page.locator("#chat-title")).to_have_text("The older thread")
    expect(page.locator(".message.user .text")).to_have_text(["The older thread"])
    expect(composer(page)).to_have_value("Half a thought about")
    shoot(page, "session-resumed")
    assert resume_entry(page) is None


def test_another_person_signing_in_after_a_session_ended_gets_neither_thread_nor_draft(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a session that ended with a thread open and a message half typed
    owner = api(user)
    seed_turns(owner, seed_project(owner), ["Private plans"])
    seed_project(api(f"{user}-other"), "Theirs")
    sign_in(page, console, user)
    end_the_session_mid_draft(page, user, "Private plans", "Private draft")
    # When someone else signs in on the same browser
    sign_in(page, console, f"{user}-other")
    # Then they get a new chat, an empty box, and the entry is gone
    expect(page.locator("#chat-title")).to_have_text("New chat")
    expect(composer(page)).to_have_value("")
    assert resume_entry(page) is None


def test_a_turn_whose_socket_is_refused_for_an_expired_token_returns_to_sign_in(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a signed-in page whose token expires before its first turn opens a socket
    seed_project(api(user))
    sign_in(page, console, user)
    expire_the_session(page, user)
    # When a message is sent (the upgrade is refused 401, then POST …/chat too)
    composer(page).fill("Are you there?")
    composer(page).press("Enter")
    # Then
    expect_back_at_sign_in(page)


def test_a_first_project_load_that_fails_offers_try_again_with_nothing_to_lose(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a user with a thread whose first GET /projects meets a 503
    owner = api(user)
    seed_turns(owner, seed_project(owner), ["Plan the spring sale"])
    failures = [1]

    def first_fails(route: Route) -> None:
        if failures:
            failures.pop()
            route.fulfill(status=503, json={"message": "Service Unavailable"})
        else:
            route.continue_()

    page.route(re.compile(r".*/projects\?limit=100.*"), first_fails)
    # When they sign in
    sign_in(page, console, user)
    # Then the page says so, offers Try again, and nothing can be typed to be lost
    expect(page.locator("#thread-list")).to_contain_text("Your projects could not be loaded")
    expect(page.locator("#project-select")).to_have_text("Projects not loaded")
    expect(composer(page)).to_be_disabled()
    expect(page.locator("#send")).to_be_disabled()
    expect(page.locator("#composer-reason")).to_contain_text("could not be loaded")
    page.screenshot(path=str(TAKEN / "projects-not-loaded.png"))
    # When
    page.get_by_role("button", name="Try again").click()
    # Then the project opens, ready for a message
    expect(page.locator(".thread")).to_have_count(1)
    expect(composer(page)).to_be_enabled()
    expect(page.locator("#composer-reason")).to_be_hidden()


def import_with_polls_failing(page: Page, failing: int) -> list[str]:
    """The import's POST is answered as still queued, so the page follows it, and its first
    ``failing`` progress reads meet a 503 (Retry-After: 0); returns the reads' statuses."""
    reads: list[str] = []

    def queued(route: Route) -> None:
        answer = route.fetch()
        body = answer.json()
        body["status"] = "queued"
        route.fulfill(response=answer, json=body)

    def read(route: Route) -> None:
        if len(reads) < failing:
            reads.append("503")
            route.fulfill(status=503, headers={"retry-after": "0"}, json={"message": "Busy"})
        else:
            reads.append("passed")
            route.continue_()

    page.route(re.compile(r".*/projects/[^/]+/import$"), queued)
    page.route(re.compile(r".*/projects/[^/]+/import/[^/]+$"), read)
    return reads


THREADS_FILE = {
    "format": "threads",
    "threads": [
        {
            "title": "Launch plan",
            "messages": [
                {"role": "user", "content": "Ready?", "createdAt": "2025-03-01T09:00:00Z"},
                {"role": "assistant", "content": "Yes.", "createdAt": "2025-03-01T09:00:04Z"},
            ],
        }
    ],
}


def start_an_import(page: Page) -> None:
    page.get_by_role("tab", name="Project").click()
    expect(page.locator("#import-file")).to_be_enabled()
    page.set_input_files(
        "#import-file",
        files=[
            {
                "name": "threads.json",
                "mimeType": "application/json",
                "buffer": json.dumps(THREADS_FILE).encode(),
            }
        ],
    )


def test_an_import_followed_through_a_failed_progress_read_still_shows_it_done(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an import whose first two progress reads meet a 503
    seed_project(api(user))
    configure(page, importPollSeconds=0.05)
    reads = import_with_polls_failing(page, failing=2)
    sign_in(page, console, user)
    # When
    start_an_import(page)
    # Then the page reads again, and shows the import done and its thread
    expect(page.locator("#import-progress")).to_contain_text("Import done: 1 threads")
    expect(page.locator(".thread", has_text="Launch plan")).to_have_count(1)
    assert reads[:3] == ["503", "503", "passed"]


def test_an_import_whose_progress_cannot_be_read_says_it_lost_track(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an import whose progress reads all meet a 503
    seed_project(api(user))
    configure(page, importPollSeconds=0.05)
    reads = import_with_polls_failing(page, failing=100)
    sign_in(page, console, user)
    # When
    start_an_import(page)
    # Then after several tries the page says so
    expect(page.locator("#import-progress")).to_contain_text("Lost track of the import")
    page.wait_for_timeout(300)
    assert len(reads) == 5
    page.screenshot(path=str(TAKEN / "import-lost-track.png"))
