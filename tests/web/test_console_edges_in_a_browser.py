"""The console when things happen out of order: a stream that drops, a project switched while
answers are on their way, keys pressed mid-reply, an erased last project, long words on a
phone. Each test signs in as its own user against make dev's server."""

from __future__ import annotations

from collections.abc import Callable
import re

from playwright.sync_api import Page, WebSocketRoute, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import sign_in
from tests.web.test_console_in_a_browser import composer, seed_project

pytestmark = pytest.mark.e2e


def drop_the_socket_after_the_first_delta(page: Page) -> list[str]:
    """Proxies the page's WebSocket and closes it under the page once a delta arrived, once;
    returns the chat frames the page sent."""
    sent: list[str] = []
    dropped: list[bool] = []

    def proxy(socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()

        def to_page(message: str | bytes) -> None:
            socket.send(message)
            if not dropped and '"delta"' in str(message):
                dropped.append(True)
                socket.close()

        def to_server(message: str | bytes) -> None:
            sent.append(str(message))
            server.send(message)

        server.on_message(to_page)
        socket.on_message(to_server)

    page.route_web_socket(re.compile(r".*/ws.*"), proxy)
    return sent


def test_a_new_chat_whose_stream_drops_is_retried_with_its_first_body_and_saved_once(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a new chat whose socket closes after the reply's first words
    owner = api(user)
    project = seed_project(owner)
    sent = drop_the_socket_after_the_first_delta(page)
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    failed = page.locator(".message.assistant.failed")
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()
    # When
    failed.get_by_role("button", name="Retry").click()
    # Then the retry is the first request again, and the reply shows
    reply = page.locator('.message.assistant[data-status="complete"]')
    expect(reply).to_have_count(1)
    assert len(sent) == 2
    first, again = (re.sub(r'"requestId":\s*"[^"]*"', "", frame) for frame in sent)
    assert first == again
    threads = owner.get(f"/projects/{project}/conversations").body["conversations"]
    assert [thread["turnCount"] for thread in threads] == [1]
    expect(page.locator("#thread-list .thread .meta")).to_contain_text("1 turn ")
