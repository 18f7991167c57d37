"""The console as a person uses it, in headless Chromium against make dev's server: sign
in, projects, the chat, threads, the model's view, roles (memory has its own module). Each
test signs in as its own user, so tests share the server and never each other's data.
Screenshots of the main views land in docs/screenshots/ for the README."""

from __future__ import annotations

import base64
from collections.abc import Callable
import json
import re

from playwright.sync_api import Page, Route, ViewportSize, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import DESKTOP, NUDGE_THRESHOLD_TURNS, PHONE, configure, shoot, sign_in
from tests.web.helpers import RULE, answered, composer, open_thread, say, seed_project, seed_turns

pytestmark = pytest.mark.e2e


def test_a_person_signs_in_makes_a_project_and_a_rule_said_in_chat_lands_in_memory(
    page: Page, console: DevServer, user: str
) -> None:
    # Given
    page.goto(console.url + "/")
    expect(page.get_by_text("Local only.")).to_be_visible()
    shoot(page, "sign-in")
    sign_in(page, console, user)
    page.get_by_role("button", name="New project").click()
    page.get_by_label("Name of the new project").fill("Corner Shop")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#project-select")).to_contain_text("Corner Shop (owner)")
    # When: Shift+Enter is a new line, Enter sends
    composer(page).fill(RULE)
    composer(page).press("Shift+Enter")
    expect(composer(page)).to_have_value(RULE + "\n")
    composer(page).fill(RULE)
    composer(page).press("Enter")
    first = page.locator(".message.assistant[data-status]").first
    expect(first).to_be_visible()
    second = say(page, "Which colour is the header?")
    # Then
    expect(first.locator(".chip")).to_have_text("saved: header_dark")
    expect(second).to_contain_text("header_dark")
    expect(page.locator(".message.user")).to_have_count(2)
    expect(page.locator("#chat-title")).to_have_text(RULE)
    today = page.locator('.period[data-period="today"]')
    expect(today.locator(".thread")).to_have_count(1)
    entry = page.locator('#memory-list .entry[data-key="header_dark"]')
    expect(entry).to_contain_text(RULE)
    expect(entry).to_contain_text("explicit")
    expect(page.locator("#memory-count")).to_have_text("1 of 50")
    shoot(page, "desktop-chat")
    page.reload()
    page.wait_for_selector('body[data-ready="console"]')
    open_thread(page, RULE)
    expect(page.locator(".message.tool .chip")).to_have_text("saved: header_dark")
    page.set_viewport_size(PHONE)
    page.locator("#phone-tabs").get_by_role("button", name="Chat").click()
    shoot(page, "phone-chat")
    page.locator("#phone-tabs").get_by_role("button", name="Threads").click()
    expect(page.locator("#threads-panel")).to_be_visible()
    expect(page.locator("#chat-panel")).to_be_hidden()
    shoot(page, "phone-threads")


def test_the_reply_streams_in_over_the_websocket_before_the_turn_is_done(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    """Awaits the WebSocket API (/ws on make dev's port): it fails until that lands."""
    # Given
    seed_project(api(user))
    sign_in(page, console, user)
    say(page, RULE)
    page.evaluate(
        """() => {
          window.seen = [];
          new MutationObserver(() => {
            const reply = document.querySelector('.message.assistant:last-of-type');
            if (reply) window.seen.push({
              streaming: reply.dataset.streaming === 'true',
              text: reply.querySelector('.text').textContent,
            });
          }).observe(document.getElementById('message-list'),
                     {subtree: true, childList: true, characterData: true, attributes: true});
        }"""
    )
    # When
    reply = say(page, "Tell me about the header colour, please, in a few sentences.")
    # Then: text showed while the turn was still streaming, and it grew into the final
    final = reply.locator(".text").text_content() or ""
    seen = page.evaluate("window.seen")
    partial = [state["text"] for state in seen if state["streaming"] and state["text"]]
    assert partial, "no reply text was shown before the done frame"
    assert all(final.startswith(text) for text in partial)
    assert reply.get_attribute("data-transport") == "stream"
    assert int(reply.get_attribute("data-deltas") or 0) >= 1
    expect(page.locator("#transport")).to_contain_text("stream over the WebSocket")


def test_a_thread_is_archived_renamed_and_restored(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(user)
    project = seed_project(owner)
    for title in ("Spring campaign", "Homepage ideas"):
        assert owner.post(f"/projects/{project}/conversations", {"title": title}).status == 201
    sign_in(page, console, user)
    open_thread(page, "Spring campaign")
    # When: archived
    page.get_by_role("button", name="Archive").click()
    # Then: gone from the list, found behind the toggle
    expect(page.locator("#thread-list .thread")).to_have_count(1)
    page.get_by_label("Archived").check()
    expect(page.locator("#thread-list .thread .title")).to_have_text(["Spring campaign"])
    # When: restored and renamed
    open_thread(page, "Spring campaign")
    page.get_by_role("button", name="Restore").click()
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("New title").fill("Summer campaign")
    page.get_by_role("button", name="Save").click()
    page.get_by_label("Archived").uncheck()
    # Then
    expect(page.locator("#thread-list .thread .title")).to_have_text(
        ["Summer campaign", "Homepage ideas"]
    )
    # When: deleted, after confirming
    page.get_by_role("button", name="Delete").click()
    page.locator("#confirm").get_by_role("button", name="Delete").click()
    # Then
    expect(page.locator("#thread-list .thread .title")).to_have_text(["Homepage ideas"])


def test_a_slow_thread_list_never_replaces_a_newer_one(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: the archived list is held back until the test lets it go
    owner = api(user)
    project = seed_project(owner)
    assert owner.post(f"/projects/{project}/conversations", {"title": "Live"}).status == 201
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(re.compile(r".*/conversations\?.*archived=true.*"), hold)
    sign_in(page, console, user)
    expect(page.locator("#thread-list .thread .title")).to_have_text(["Live"])
    # When: archived asked, then the live list asked again before the first answers
    page.get_by_label("Archived").check()
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(50)
    page.get_by_label("Archived").uncheck()
    expect(page.locator("#thread-list .thread .title")).to_have_text(["Live"])
    answered(page, held)
    # Then
    assert len(held) == 1
    expect(page.locator("#thread-list .thread .title")).to_have_text(["Live"])


def test_threads_come_fifty_at_a_time_with_more(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(user)
    project = seed_project(owner)
    for n in range(51):
        assert owner.post(f"/projects/{project}/conversations", {"title": f"T{n}"}).status == 201
    sign_in(page, console, user)
    threads = page.locator("#thread-list .thread")
    expect(threads).to_have_count(50)
    expect(threads.first).to_contain_text("T50")
    # When
    page.get_by_role("button", name="More").click()
    # Then
    expect(threads).to_have_count(51)
    expect(threads.last).to_contain_text("T0")
    expect(page.get_by_role("button", name="More")).to_be_hidden()


def test_a_viewer_sees_every_control_disabled_with_the_reason(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(f"owner-of-{user}")
    project = seed_project(owner, "Shared shop")
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "viewer"}).status == 201
    # When
    sign_in(page, console, user)
    # Then
    expect(page.locator("#who-role")).to_have_text("viewer")
    expect(composer(page)).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.get_by_role("button", name="New chat")).to_be_disabled()
    expect(page.locator("#composer-reason")).to_contain_text("You are a viewer")
    page.get_by_text("Add an entry").click()
    expect(page.get_by_label("Key")).to_be_disabled()
    expect(page.get_by_role("button", name="Save entry")).to_be_disabled()
    expect(page.locator('[data-reason="edit"]')).to_contain_text("You are a viewer")
    page.get_by_role("tab", name="Project").click()
    expect(page.get_by_role("button", name="Rename")).to_be_disabled()
    expect(page.locator("#member-list select").first).to_be_disabled()
    expect(page.locator('[data-reason="own"]')).to_contain_text("You are a viewer")
    page.set_viewport_size(PHONE)
    page.locator("#phone-tabs").get_by_role("button", name="Chat").click()
    shoot(page, "phone-viewer")


def test_an_owner_renames_the_project_and_manages_members(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    project = seed_project(api(user))
    sign_in(page, console, user)
    page.get_by_role("tab", name="Project").click()
    # When
    page.get_by_label("Name", exact=True).fill("Corner Shop EU")
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("User id").fill("bob")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Add").click()
    bob = page.locator('#member-list li[data-user="bob"]')
    expect(bob.locator("select")).to_have_value("viewer")
    bob.get_by_label("Role of bob").select_option("editor")
    # Then
    expect(page.locator("#project-select")).to_contain_text("Corner Shop EU (owner)")
    expect(bob.locator("select")).to_have_value("editor")
    expect(page.locator('#usage-members li[data-user="bob"]')).to_contain_text("editor")
    shoot(page, "desktop-project")
    members = api(user).get(f"/projects/{project}/members").body["members"]
    assert {m["userId"]: m["role"] for m in members} == {user: "owner", "bob": "editor"}
    # When: removed, after confirming
    bob.get_by_role("button", name="Remove").click()
    page.locator("#confirm").get_by_role("button", name="Remove").click()
    # Then
    expect(bob).to_have_count(0)


def test_an_editor_renames_the_project_but_cannot_manage_its_members(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an editor of someone else's project
    owner = api(f"owner-of-{user}")
    project = seed_project(owner, "Shared shop")
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "editor"}).status == 201
    sign_in(page, console, user)
    page.get_by_role("tab", name="Project").click()
    # When
    page.get_by_label("Name", exact=True).fill("Shared shop EU")
    page.get_by_role("button", name="Rename").click()
    # Then the project is renamed, and adding members is left to its owners, with the reason
    expect(page.locator("#project-select")).to_contain_text("Shared shop EU (editor)")
    assert owner.get(f"/projects/{project}").body["name"] == "Shared shop EU"
    expect(page.get_by_role("button", name="Add")).to_be_disabled()
    expect(page.locator('[data-reason="own"]')).to_have_text(
        "Only the project's owners manage its members."
    )


def test_a_long_thread_shows_the_nudge_banner_offering_a_new_thread(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: a thread at the server's (lowered) threshold
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, [f"Idea {n} for the homepage" for n in range(NUDGE_THRESHOLD_TURNS)])
    sign_in(page, console, user)
    open_thread(page, "Idea 0 for the homepage")
    expect(page.locator("#nudge")).to_be_hidden()
    # When: one more turn passes it
    say(page, "And one more idea")
    # Then
    banner = page.locator("#nudge")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text(f"{NUDGE_THRESHOLD_TURNS + 1} turns")
    shoot(page, "desktop-nudge")
    # When: the new thread is taken
    page.get_by_role("button", name="New thread with the summary").click()
    # Then: a new chat, its first message offered with where the old one left off
    expect(page.locator("#chat-title")).to_have_text("New chat")
    expect(composer(page)).to_have_value(
        re.compile(r'^Continuing from "Idea 0 for the homepage"\.')
    )
    # When: back on the long thread, dismissed
    open_thread(page, "Idea 0 for the homepage")
    say(page, "Still here")
    page.get_by_role("button", name="Dismiss").click()
    # Then
    expect(banner).to_be_hidden()


def test_the_context_preview_shows_each_layer_and_clearing_marks_the_thread(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, [RULE, "Which colour is the header?"])
    sign_in(page, console, user)
    open_thread(page, RULE)
    # When
    page.get_by_role("tab", name="What the model sees").click()
    # Then
    view = page.locator("#context-view")
    for layer in ("system", "memory", "project", "summary", "window"):
        expect(view.locator(f'[data-layer="{layer}"]')).to_be_visible()
    expect(view.locator('[data-layer="memory"]')).to_contain_text("header_dark")
    expect(view.locator('[data-layer="project"]')).to_contain_text("currency")
    expect(view.locator('[data-layer="window"]')).to_contain_text(f"user: {RULE}")
    expect(view.locator('[data-layer="window"]')).to_contain_text("user: Which colour")
    expect(view.locator(".tokens")).to_contain_text("tokens")
    assert int(view.locator(".tokens").get_attribute("data-tokens") or 0) > 0
    # Taller than the desktop: every layer and the thread's own settings show unscrolled.
    page.set_viewport_size(ViewportSize(width=DESKTOP["width"], height=1000))
    shoot(page, "desktop-context")
    page.set_viewport_size(DESKTOP)
    # When
    page.get_by_role("button", name="Clear context").click()
    # Then
    expect(page.locator("#message-list .marker")).to_contain_text("Context cleared")
    expect(view.locator('[data-layer="window"]')).to_contain_text("(empty)")
    page.reload()
    page.wait_for_selector('body[data-ready="console"]')
    open_thread(page, RULE)
    expect(page.locator("#message-list .marker")).to_have_count(1)
    expect(page.locator("#message-list > li").last).to_have_class("marker")


def test_a_refused_turn_is_shown_failed_in_words_with_a_retry(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a page that thinks the API takes longer messages than it does
    seed_project(api(user))
    configure(page, messageMaxChars=20_000)
    sign_in(page, console, user)
    # When: a message over the API's limit, which the API refuses
    reply = say(page, "x" * 16_001)
    # Then
    expect(reply).to_have_class(re.compile(r"\bfailed\b"))
    expect(reply.locator(".error-words")).to_contain_text("Failed:")
    expect(reply.get_by_role("button", name="Retry")).to_be_visible()
    words = reply.locator(".error-words").text_content() or ""
    assert "message" in words.lower(), words


def test_older_messages_load_when_scrolled_to_the_top(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: 27 turns, 54 messages, more than one page of 50
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, [f"Note {n}" for n in range(27)])
    sign_in(page, console, user)
    open_thread(page, "Note 0")
    messages = page.locator("#message-list .message")
    expect(messages).to_have_count(50)
    expect(messages.first).not_to_contain_text("Note 0")
    # When
    page.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
    # Then
    expect(messages).to_have_count(54)
    expect(messages.first).to_contain_text("Note 0")
    expect(page.get_by_role("button", name="Load older messages")).to_be_hidden()


def test_a_pasted_token_the_api_refuses_is_said_in_words(page: Page, console: DevServer) -> None:
    # Given: a JWT whose exp has passed, which the API answers 401
    expired = ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in ({"alg": "HS256", "typ": "JWT"}, {"sub": "late", "exp": 1}, "x")
    )
    page.goto(console.url + "/")
    # When
    page.get_by_label("Paste a JWT from your identity provider").fill(expired)
    page.get_by_role("button", name="Use this token").click()
    # Then
    expect(page.locator("#alerts .alert")).to_contain_text(
        "Could not sign in (the API refused the token): Unauthorized"
    )
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#console")).to_be_hidden()
    expect(page.locator("body")).to_have_attribute("data-ready", "sign-in")
