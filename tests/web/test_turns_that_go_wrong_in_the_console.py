"""A turn that goes wrong in the console: a chat frame lost on its way (sent once more
under the same key), a reply that stops or never comes (failed with a Retry, and shown
after all when it comes late), a resend refused, a message over the API's limit. Each test
signs in as its own user against make dev's server."""

from __future__ import annotations

from collections.abc import Callable
import json
import re

from playwright.sync_api import Page, WebSocket, WebSocketRoute, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import TAKEN, configure, shoot, sign_in
from tests.web.helpers import HeldReplies, composer, seed_project

pytestmark = pytest.mark.e2e


def swallow_chat_frames(page: Page, answer_after: int | None = None) -> list[dict[str, object]]:
    """Proxies the page's WebSocket and drops its chat frames, as a lost hand-off would, but
    the ``answer_after``-th one (1-based), which goes on to the server; returns them all."""
    sent: list[dict[str, object]] = []

    def proxy(socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()

        def to_server(message: str | bytes) -> None:
            frame = json.loads(message)
            sent.append(frame)
            if answer_after is not None and len(sent) == answer_after:
                server.send(message)

        socket.on_message(to_server)

    page.route_web_socket(re.compile(r".*/ws.*"), proxy)
    return sent


def test_a_turn_that_hears_nothing_sends_its_frame_again_under_a_new_request_id_and_the_same_key(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a socket that loses the first chat frame, and a short wait for an answer
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.5)
    sent = swallow_chat_frames(page, answer_after=2)
    sign_in(page, console, user)
    # When a message is sent
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then the frame is sent again, under its own requestId and the same key, and its reply
    # shows
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    assert len(sent) == 2
    first, again = ({**frame, "requestId": None} for frame in sent)
    assert first == again and first["idempotencyKey"]
    assert sent[0]["requestId"] != sent[1]["requestId"]
    expect(page.locator("#send")).to_be_enabled()


def test_a_reply_that_streams_slowly_after_its_start_is_neither_sent_again_nor_failed(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a short silence and a longer wait between a running turn's frames, on a clock
    # that stands still until moved: the silences pass after the start, however long the
    # server took to send it
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.3, replyStreamSeconds=10)
    sent = chat_frames_sent(page)
    replies = HeldReplies(page)
    page.clock.install()
    sign_in(page, console, user)
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    # When the start frame comes, then nothing for several silences, then the rest
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator("#chat-title")).not_to_have_text("New chat")
    page.clock.run_for(1200)  # four silences: the old timer resent at 0.3 s, failed at 0.6 s
    expect(page.locator(".message.assistant.failed")).to_have_count(0)
    replies.release()
    # Then the reply shows, from the one frame sent
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    assert len(sent) == 1


def until(page: Page, condition: Callable[[], bool]) -> None:
    for _ in range(300):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError("the condition never held")


def test_a_turn_failed_for_no_answer_still_shows_its_reply_when_it_comes_late(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a turn whose frames back are held until it failed with no answer
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.3)
    # (only the first chat frame reaches the server: a resend or a retry is lost)
    replies = HeldReplies(page, start_passes=False, passes=lambda place: place == 1)
    sent = replies.sent
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator(".message.assistant.failed")).to_have_attribute("data-code", "no_answer")
    shoot(page, "turn-no-answer-yet")
    # When its frames arrive after all
    replies.release()
    # Then its reply shows, once, no longer failed and without a Retry
    reply = page.locator(".message.assistant")
    expect(reply).to_have_count(1)
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply).not_to_have_class(re.compile(r"failed"))
    expect(reply.get_by_role("button", name="Retry")).to_have_count(0)
    expect(reply.locator(".error-words")).to_have_count(0)
    assert len(sent) == 2


def test_retrying_a_turn_that_heard_no_answer_takes_over_its_first_run(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a turn failed for no answer, whose first run's frames are held
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.3)
    # (only the first chat frame reaches the server: a resend or a retry is lost)
    replies = HeldReplies(page, start_passes=False, passes=lambda place: place == 1)
    sent = replies.sent
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    failed = page.locator(".message.assistant.failed")
    expect(failed).to_have_attribute("data-code", "no_answer")
    # When Retry is pressed (its frame is lost), and then the first run's frames arrive
    failed.get_by_role("button", name="Retry").click()
    until(page, lambda: len(sent) > 2)
    replies.release()
    # Then the retried turn shows the first run's reply, once
    reply = page.locator(".message.assistant")
    expect(reply).to_have_count(1)
    expect(reply).to_have_attribute("data-status", "complete")
    expect(reply.get_by_role("button", name="Retry")).to_have_count(0)
    expect(page.locator(".message.user")).to_have_count(1)
    assert {frame["idempotencyKey"] for frame in sent} == {sent[0]["idempotencyKey"]}
    assert len({frame["requestId"] for frame in sent}) == len(sent)
    expect(page.locator("#send")).to_be_enabled()


def test_a_turn_that_never_gets_an_answer_fails_with_a_retry_and_frees_the_composer(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a socket that loses every chat frame, and a short wait for an answer
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.3)
    sent = swallow_chat_frames(page)
    sign_in(page, console, user)
    # When a message is sent
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then after it was sent twice the turn fails in words, with a Retry, and Send is free
    failed = page.locator(".message.assistant.failed")
    expect(failed).to_contain_text("No answer came")
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()
    assert len(sent) == 2
    expect(page.locator("#send")).to_be_enabled()
    page.screenshot(path=str(TAKEN / "turn-no-answer.png"))
    # When the next message is sent
    composer(page).fill("Anyone there?")
    composer(page).press("Enter")
    # Then it goes
    expect(composer(page)).to_have_value("")
    expect(page.locator(".message.user")).to_have_count(2)


def test_a_new_chats_turn_that_stops_answering_keeps_its_thread_on_screen_with_a_retry(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a new chat whose reply goes silent after its start frame named the new thread
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.5, replyStreamSeconds=1)
    HeldReplies(page)
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator("#chat-title")).not_to_have_text("New chat")
    title = page.locator("#chat-title").inner_text()
    # When no answer comes
    failed = page.locator(".message.assistant.failed")
    expect(failed).to_have_attribute("data-code", "no_answer")
    # Then the thread stays open, with the message and a Retry
    expect(page.locator("#chat-title")).to_have_text(title)
    expect(page.locator("#thread-actions")).to_be_visible()
    expect(page.locator(".message.user .text")).to_have_text(["Plan the spring sale"])
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()


def refuse_the_resend_with_a_401(page: Page) -> list[dict[str, object]]:
    """Proxies the page's WebSocket: the first chat frame is lost, the second (the resend) is
    answered with the 401 error frame a token past its exp gets, the socket staying open, and
    later ones go on to the server; returns the chat frames sent."""
    sent: list[dict[str, object]] = []

    def proxy(socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()

        def to_server(message: str | bytes) -> None:
            frame = json.loads(message)
            sent.append(frame)
            if len(sent) == 2:
                body = {"error": {"code": "unauthenticated", "message": "The token has expired."}}
                refusal = {"type": "error", "requestId": frame["requestId"], "status": 401}
                socket.send(json.dumps({**refusal, "body": body}))
            elif len(sent) > 2:
                server.send(message)

        socket.on_message(to_server)

    page.route_web_socket(re.compile(r".*/ws.*"), proxy)
    return sent


def test_a_401_answering_the_resend_fails_only_that_turn_and_keeps_the_session(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a turn whose first frame is lost and whose resend is answered 401, on a clock
    # that stands still until moved: only that turn's silence passes, so the next turn is
    # never sent again however long the server takes to start it
    seed_project(api(user))
    configure(page, replySilenceSeconds=0.3)
    sent = refuse_the_resend_with_a_401(page)
    page.clock.install()
    sign_in(page, console, user)
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    # When a message is sent, and nothing is heard for a silence
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    until(page, lambda: len(sent) == 1)
    page.clock.run_for(300)
    # Then that turn fails in words, with a Retry, and the page stays signed in
    failed = page.locator(".message.assistant.failed")
    expect(failed).to_have_attribute("data-code", "resend_refused")
    expect(failed).to_contain_text("The message sent again was refused")
    expect(failed.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.locator("#console")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('recall.token')")
    # When the next message is sent, on the same socket
    composer(page).fill("Anyone there?")
    composer(page).press("Enter")
    # Then it streams its reply
    reply = page.locator('.message.assistant[data-status="complete"]')
    expect(reply).to_have_attribute("data-transport", "stream")
    assert len(sent) == 3


def chat_frames_sent(page: Page) -> list[str]:
    sent: list[str] = []

    def seen(socket: WebSocket) -> None:
        socket.on("framesent", lambda payload: sent.append(str(payload)))

    page.on("websocket", seen)
    return sent


def test_a_message_over_the_apis_limit_stays_in_the_box_and_is_never_sent(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given (each emoji is one character to the API, two UTF-16 units, four bytes)
    seed_project(api(user))
    sent = chat_frames_sent(page)
    sign_in(page, console, user)
    too_long = "😀" * 16_001
    # When a message one character over MESSAGE_MAX_CHARS is sent
    composer(page).fill(too_long)
    composer(page).press("Enter")
    # Then it stays in the box, the page says why, and nothing is sent
    note = page.locator("#composer-note")
    expect(note).to_contain_text("Your message is 16,001 characters")
    expect(note).to_contain_text("at most 16,000")
    assert composer(page).input_value() == too_long
    expect(page.locator(".message")).to_have_count(0)
    page.screenshot(path=str(TAKEN / "message-too-long.png"))
    assert sent == []
    # When it is cut to the limit
    composer(page).fill("😀" * 16_000)
    composer(page).press("Enter")
    # Then it is sent, and the note goes
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    expect(note).to_be_hidden()
