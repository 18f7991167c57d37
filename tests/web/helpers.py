"""What the browser tests share: seeding a project and its turns through the API, the
composer and a turn sent from it, and holding an answer (an HTTP request or the socket's
frames) until the test lets it go."""

from __future__ import annotations

from collections.abc import Callable
import json
import re
from typing import Any

from playwright.sync_api import Page, Route, WebSocketRoute, expect

from tests.e2e.conftest import Caller

RULE = "Always keep the header dark"


def composer(page: Page) -> Any:
    return page.get_by_label("Message", exact=True)


def say(page: Page, text: str) -> Any:
    """Send ``text`` with Enter; the reply's element once its turn has ended."""
    before = page.locator(".message.assistant[data-status]").count()
    composer(page).fill(text)
    composer(page).press("Enter")
    finished = page.locator(".message.assistant[data-status]").nth(before)
    expect(finished).to_be_visible()
    return finished


def seed_project(owner: Caller, name: str = "Corner Shop") -> str:
    created = owner.post("/projects", {"name": name, "context": {"currency": "EUR"}})
    assert created.status == 201, created
    return str(created.body["id"])


def seed_turns(owner: Caller, project: str, messages: list[str]) -> str:
    thread = None
    for message in messages:
        body: dict[str, str] = {"message": message}
        if thread:
            body["conversationId"] = thread
        reply = owner.post(f"/projects/{project}/chat", body)
        assert reply.status == 200, reply
        thread = reply.body["conversation"]["id"]
    assert isinstance(thread, str)
    return thread


def open_thread(page: Page, title: str) -> None:
    page.locator(".thread", has_text=title).first.click()
    expect(page.locator("#chat-title")).to_have_text(title)


def held_until_released(page: Page, pattern: str) -> list[Route]:
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(re.compile(pattern), hold)
    return held


def wait_for(page: Page, held: list[Route]) -> None:
    for _ in range(200):
        if held:
            return
        page.wait_for_timeout(50)
    raise AssertionError("the request was never sent")


class HeldReplies:
    """Proxies the page's WebSocket; while holding, every frame after a turn's start (with
    ``start_passes=False``, the start too) waits until released. Every chat frame the page
    sends is kept in ``sent``, and reaches the server only when ``passes`` says so of its
    place (1-based): a frame it refuses is lost, as a lost hand-off would be."""

    def __init__(
        self,
        page: Page,
        *,
        start_passes: bool = True,
        passes: Callable[[int], bool] = lambda place: True,
    ) -> None:
        self.holding = True
        self.start_passes = start_passes
        self.passes = passes
        self.sent: list[dict[str, object]] = []
        self.held: list[str | bytes] = []
        self.sockets: list[WebSocketRoute] = []
        page.route_web_socket(re.compile(r".*/ws.*"), self.proxy)

    def proxy(self, socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()
        self.sockets.append(socket)

        def to_server(message: str | bytes) -> None:
            self.sent.append(json.loads(message))
            if self.passes(len(self.sent)):
                server.send(message)

        def to_page(message: str | bytes) -> None:
            starts = self.start_passes and '"start"' in str(message)
            if self.holding and not starts:
                self.held.append(message)
            else:
                socket.send(message)

        socket.on_message(to_server)
        server.on_message(to_page)

    def release(self) -> None:
        self.holding = False
        for message in self.held:
            self.sockets[-1].send(message)
        self.held = []

    def hold(self) -> None:
        self.holding = True


def answered(page: Page, held: list[Route]) -> None:
    """Let held requests go on, and wait until each answer has reached the page."""
    for route in held:
        with page.expect_request_finished(lambda request, route=route: request == route.request):
            route.continue_()
