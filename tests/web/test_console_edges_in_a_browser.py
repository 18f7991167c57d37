"""The console when things happen out of order: a stream that drops, a project switched while
answers are on their way, keys pressed mid-reply, an erased last project, a reply that
ends after another thread opened. Each test signs in as its own user against make dev's server."""

from __future__ import annotations

from collections.abc import Callable
import json
import re

from playwright.sync_api import Page, WebSocketRoute, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import NUDGE_THRESHOLD_TURNS, sign_in
from tests.web.helpers import (
    HeldReplies,
    answered,
    composer,
    held_until_released,
    open_thread,
    say,
    seed_project,
    seed_turns,
    wait_for,
)

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


def memory_of(owner: Caller, project: str) -> dict[str, str]:
    memories = owner.get(f"/projects/{project}/memories").body["memories"]
    return {entry["key"]: entry["value"] for entry in memories}


def test_a_project_switched_while_its_memory_loads_shows_and_edits_only_the_new_one(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given two projects, each with a thread and a memory entry, the first one open
    owner = api(user)
    first = seed_project(owner, "First shop")
    second = seed_project(owner, "Second shop")
    for project, key in ((first, "first_rule"), (second, "second_rule")):
        put = owner.put(f"/projects/{project}/memories/{key}", {"value": key, "category": "brand"})
        assert put.status == 201, put
        assert owner.post(f"/projects/{project}/conversations", {"title": key}).status == 201
    sign_in(page, console, user)
    page.locator("#project-select").select_option(first)
    expect(page.locator('#memory-list .entry[data-key="first_rule"]')).to_be_visible()
    # When the first project's memory is asked again and held, and the second one opens
    held_memory = held_until_released(page, rf".*/projects/{first}/memories.*")
    held_threads = held_until_released(page, rf".*/projects/{second}/conversations\?.*")
    page.get_by_role("button", name="Refresh").first.click()
    wait_for(page, held_memory)
    page.locator("#project-select").select_option(second)
    # Then nothing of the first project shows while the second one's answers are on their way
    wait_for(page, held_threads)
    expect(page.locator("#thread-list")).not_to_contain_text("first_rule")
    expect(page.locator("#thread-list")).to_contain_text("Loading")
    expect(page.locator('#memory-list .entry[data-key="second_rule"]')).to_be_visible()
    expect(page.locator("#memory-list")).not_to_contain_text("first_rule")
    # When the first project's memory answers last
    answered(page, held_memory + held_threads)
    # Then it is dropped, and an edit goes to the second project
    expect(page.locator(".thread .title")).to_have_text(["second_rule"])
    expect(page.locator("#memory-list .entry")).to_have_count(1)
    entry = page.locator('#memory-list .entry[data-key="second_rule"]')
    entry.get_by_role("button", name="Edit").click()
    entry.get_by_label("Value").fill("edited")
    entry.get_by_role("button", name="Save").click()
    expect(entry.locator(".value")).to_have_text("edited")
    assert memory_of(owner, first) == {"first_rule": "first_rule"}
    assert memory_of(owner, second) == {"second_rule": "edited"}


def test_enter_in_the_new_project_and_rename_dialogs_saves(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    sign_in(page, console, user)
    # When a project is named with the keyboard
    page.get_by_role("button", name="New project").click()
    page.keyboard.type("Keyboard shop")
    page.keyboard.press("Enter")
    # Then it is made
    expect(page.locator("#project-select")).to_contain_text("Keyboard shop (owner)")
    # When a thread is renamed with the keyboard, typing past the API's 80 characters
    say(page, "First words")
    page.get_by_role("button", name="Rename").click()
    page.keyboard.press("Control+A")
    page.keyboard.type("T" * 100)
    page.keyboard.press("Enter")
    # Then the title is the 80 characters that fit, and the API took it
    expect(page.locator("#chat-title")).to_have_text("T" * 80)
    expect(page.locator("#alerts .alert")).to_have_count(0)
    projects = api(user).get("/projects").body["projects"]
    assert [project["name"] for project in projects] == ["Keyboard shop"]
    threads = api(user).get(f"/projects/{projects[0]['id']}/conversations").body["conversations"]
    assert [thread["title"] for thread in threads] == ["T" * 80]


def test_a_message_sent_while_a_reply_streams_is_not_lost(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a reply still streaming
    seed_project(api(user))
    replies = HeldReplies(page)
    sign_in(page, console, user)
    composer(page).fill("First question")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-streaming="true"]')).to_be_visible()
    # When the next message is sent with Enter before the reply ends
    composer(page).fill("Second question")
    composer(page).press("Enter")
    # Then it stays in the box, and the page says why
    expect(composer(page)).to_have_value("Second question")
    expect(page.locator("#composer-wait")).to_be_visible()
    # When the reply ends, and Enter is pressed again
    replies.release()
    expect(page.locator(".message.assistant[data-status]")).to_have_count(1)
    expect(page.locator("#composer-wait")).to_be_hidden()
    composer(page).press("Enter")
    # Then it is sent
    expect(page.locator(".message.assistant[data-status]")).to_have_count(2)
    expect(page.locator(".message.user .text")).to_have_text(["First question", "Second question"])


def test_erasing_my_data_in_my_only_project_leaves_nothing_of_it_to_click(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an editor whose only project has their thread and a preset
    owner = api(f"{user}-owner")
    project = seed_project(owner)
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "editor"}).status == 201
    preset = owner.post(
        f"/projects/{project}/presets", {"name": "Copywriter", "contextPrompts": []}
    )
    assert preset.status == 201, preset
    seed_turns(api(user), project, ["Plan the sale"])
    sign_in(page, console, user)
    expect(page.locator(".thread")).to_have_count(1)
    expect(page.locator("#preset-pick")).to_be_visible()
    page.get_by_role("tab", name="Project").click()
    expect(page.locator("#member-list li")).to_have_count(2)
    # When
    page.get_by_role("button", name="Erase my data in this project").click()
    page.locator("#confirm").get_by_role("button", name="Erase").click()
    # Then no panel keeps the project, and what needs one is disabled
    expect(page.locator("#project-select")).to_have_text("No project yet")
    expect(page.locator(".thread")).to_have_count(0)
    expect(page.locator("#thread-list")).to_contain_text("No project yet")
    expect(page.locator("#member-list li")).to_have_count(0)
    expect(page.locator("#preset-list li")).to_have_count(0)
    expect(page.locator("#preset-pick")).to_be_hidden()
    expect(page.locator("#who-role")).to_be_hidden()
    page.locator("#preset-add summary").click()
    expect(page.locator("#preset-name")).to_be_disabled()
    for name in ("Earlier day", "Day", "Month"):
        expect(page.get_by_role("button", name=re.compile(f"^{name}"))).to_be_disabled()
    page.get_by_role("tab", name="Memory").click()
    expect(page.locator("#memory-list .entry")).to_have_count(0)


def test_a_reply_that_ends_after_another_thread_or_project_opened_counts_on_its_own_thread(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread at the nudge threshold, another thread, and another project
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, [f"Idea {n}" for n in range(NUDGE_THRESHOLD_TURNS)])
    assert owner.post(f"/projects/{project}/conversations", {"title": "Quiet"}).status == 201
    other = seed_project(owner, "Other shop")
    replies = HeldReplies(page)
    sign_in(page, console, user)
    page.locator("#project-select").select_option(project)
    open_thread(page, "Idea 0")
    # When its next turn, past the threshold, ends after the other thread opened
    composer(page).fill("One idea too many")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-streaming="true"]')).to_be_visible()
    open_thread(page, "Quiet")
    replies.release()
    # Then the count lands on its own thread, and the open one shows no nudge
    idea = page.locator(".thread", has_text="Idea 0")
    expect(idea.locator(".meta")).to_contain_text(f"{NUDGE_THRESHOLD_TURNS + 1} turns")
    expect(page.locator(".thread", has_text="Quiet").locator(".meta")).to_contain_text("0 turns")
    expect(page.locator("#nudge")).to_be_hidden()
    # When a new chat's reply ends after another project opened
    replies.hold()
    page.get_by_role("button", name="New chat").click()
    composer(page).fill("Start something")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-streaming="true"]')).to_be_visible()
    page.locator("#project-select").select_option(other)
    expect(page.locator("#thread-list")).to_contain_text("No conversations yet")
    replies.release()
    # Then the other project stays as it was (and no script error is thrown)
    expect(page.locator("#chat-title")).to_have_text("New chat")
    page.wait_for_timeout(500)
    expect(page.locator(".thread")).to_have_count(0)
    assert len(owner.get(f"/projects/{project}/conversations").body["conversations"]) == 3


def test_an_imported_preset_shows_in_the_presets_and_the_new_chat_picker(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an export of a project with a preset, and another project open
    owner = api(user)
    source = seed_project(owner, "Source shop")
    preset = owner.post(f"/projects/{source}/presets", {"name": "Imported voice"})
    assert preset.status == 201, preset
    exported = owner.get(f"/projects/{source}/export")
    assert exported.status == 200, exported
    target = seed_project(owner, "Target shop")
    sign_in(page, console, user)
    page.locator("#project-select").select_option(target)
    page.get_by_role("tab", name="Project").click()
    expect(page.locator("#preset-list")).to_contain_text("No presets yet")
    expect(page.locator("#import-file")).to_be_enabled()
    # When
    page.set_input_files(
        "#import-file",
        files=[
            {
                "name": "export.json",
                "mimeType": "application/json",
                "buffer": json.dumps(exported.body).encode(),
            }
        ],
    )
    # Then
    expect(page.locator("#import-progress")).to_contain_text("Import done")
    expect(page.locator("#preset-list")).to_contain_text("Imported voice")
    expect(page.get_by_label("Start from preset")).to_contain_text("Imported voice")


def test_a_member_demoted_while_the_page_is_open_sees_the_new_role_after_the_first_refusal(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an editor's page open on a shared project
    owner = api(f"owner-of-{user}")
    project = seed_project(owner, "Shared shop")
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "editor"}).status == 201
    sign_in(page, console, user)
    expect(page.locator("#who-role")).to_have_text("editor")
    # When the owner makes them a viewer, and they send a message
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "viewer"}).status == 200
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    # Then the refusal shows, and the page now says what a viewer may do, without a reload
    expect(page.locator(".message.assistant.failed")).to_have_count(1)
    expect(page.locator("#who-role")).to_have_text("viewer")
    expect(composer(page)).to_be_disabled()
    expect(page.locator("#composer-reason")).to_contain_text("You are a viewer")
    expect(page.locator("#project-select option:checked")).to_have_text("Shared shop (viewer)")


def refuse_the_first_save(page: Page) -> list[dict[str, object]]:
    """Proxies the page's WebSocket and answers the first turn's end as a save the API
    refused (503, naming no thread); returns the chat frames the page sent."""
    sent: list[dict[str, object]] = []

    def proxy(socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()
        refused: list[bool] = []

        def to_page(message: str | bytes) -> None:
            frame = json.loads(message)
            if frame.get("type") == "done" and not refused:
                refused.append(True)
                unavailable = {"code": "unavailable", "message": "The store is unavailable."}
                frame = {
                    "type": "error",
                    "requestId": frame["requestId"],
                    "status": 503,
                    "retryAfter": 2,
                    "body": {"error": unavailable},
                }
            socket.send(json.dumps(frame))

        def to_server(message: str | bytes) -> None:
            sent.append(json.loads(message))
            server.send(message)

        server.on_message(to_page)
        socket.on_message(to_server)

    page.route_web_socket(re.compile(r".*/ws.*"), proxy)
    return sent


def test_after_a_new_chats_save_is_refused_the_next_message_starts_a_thread(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a new chat whose first turn's save the API refuses
    seed_project(api(user))
    sent = refuse_the_first_save(page)
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator(".message.assistant.failed")).to_be_visible()
    # Then the chat is new again: the thread the turn made was taken back with its refusal
    expect(page.locator("#chat-title")).to_have_text("New chat")
    expect(page.locator("#thread-actions")).to_be_hidden()
    # When another message is sent
    composer(page).fill("Plan the summer sale")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    # Then it named no thread, and started one
    bodies = [frame["body"] for frame in sent]
    assert [body.get("conversationId") for body in bodies] == [None, None]  # type: ignore[attr-defined]
    expect(page.locator("#chat-title")).to_have_text("Plan the summer sale")


def test_after_a_new_chats_stream_drops_the_next_message_goes_on_in_its_thread(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a new chat whose socket closes mid-reply: the turn is still saved
    owner = api(user)
    project = seed_project(owner)
    sent = drop_the_socket_after_the_first_delta(page)
    sign_in(page, console, user)
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator(".message.assistant.failed")).to_be_visible()
    # When another message is sent, not a retry
    composer(page).fill("And the summer one")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    # Then it went on in the thread the first one made
    [thread] = owner.get(f"/projects/{project}/conversations").body["conversations"]
    second = json.loads(sent[-1])["body"]
    assert second.get("conversationId") == thread["id"]
    expect(page.locator("#chat-title")).to_have_text("Plan the spring sale")
