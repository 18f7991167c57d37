"""The console when things happen out of order: a stream that drops, a project switched while
answers are on their way, keys pressed mid-reply, an erased last project, long words on a
phone. Each test signs in as its own user against make dev's server."""

from __future__ import annotations

from collections.abc import Callable
import json
import re

from playwright.sync_api import Page, Route, WebSocketRoute, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import NUDGE_THRESHOLD_TURNS, PHONE, TAKEN, sign_in
from tests.web.test_console_in_a_browser import (
    composer,
    open_thread,
    say,
    seed_project,
    seed_turns,
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
    for route in held_memory + held_threads:
        route.continue_()
    page.wait_for_load_state("networkidle")
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


LONG_WORD = "Supercalifragilistic" * 12


def fits_the_screen(page: Page, selector: str) -> None:
    widths = page.locator(selector).evaluate(
        "node => ({scroll: node.scrollWidth, client: node.clientWidth})"
    )
    assert widths["scroll"] <= widths["client"], (selector, widths)


def test_long_unbroken_words_stay_on_a_phone_screen(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given long words in a thread's title and messages, a memory entry, a preset's name
    owner = api(user)
    project = seed_project(owner, LONG_WORD[:60])
    seed_turns(owner, project, [f"{LONG_WORD} and more"])
    put = owner.put(
        f"/projects/{project}/memories/long_word", {"value": LONG_WORD, "category": "brand"}
    )
    assert put.status == 201, put
    preset = owner.post(f"/projects/{project}/presets", {"name": LONG_WORD[:80]})
    assert preset.status == 201, preset
    page.set_viewport_size(PHONE)
    sign_in(page, console, user)
    tabs = page.locator("#phone-tabs")
    # When each view is shown
    expect(page.get_by_label("Start from preset")).to_be_visible()
    # Then nothing is wider than the screen
    fits_the_screen(page, "html")
    fits_the_screen(page, "#chat-panel")
    page.screenshot(path=str(TAKEN / "phone-long-new-chat.png"))
    tabs.get_by_role("button", name="Threads").click()
    fits_the_screen(page, "#threads-panel")
    page.locator(".thread").first.click()
    expect(page.locator("#chat-title")).to_contain_text("Supercalifragilistic")
    fits_the_screen(page, "html")
    fits_the_screen(page, ".chat-head")
    fits_the_screen(page, "#messages")
    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#alerts .alert")).to_contain_text("archived")
    fits_the_screen(page, "#alerts .alert")
    page.screenshot(path=str(TAKEN / "phone-long-chat.png"))
    for view in ("Memory", "Model view", "Project"):
        tabs.get_by_role("button", name=view).click()
        page.wait_for_load_state("networkidle")
        fits_the_screen(page, "html")
        fits_the_screen(page, "#side-panel")
        page.screenshot(
            path=str(TAKEN / f"phone-long-{view.lower().replace(' ', '-')}.png"), full_page=True
        )


def focused(page: Page) -> str:
    """The focused element, as tag#id[data-key|data-user] of its nearest entry or member."""
    return str(
        page.evaluate(
            """() => {
              const node = document.activeElement;
              const owner = node.closest('[data-key], [data-user]');
              const mark = owner ? (owner.dataset.key || owner.dataset.user) : '';
              return `${node.tagName.toLowerCase()}#${node.id}[${mark}]`;
            }"""
        )
    )


def test_focus_stays_on_what_was_changed_after_the_list_is_drawn_again(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a project with a memory entry and a second member
    owner = api(user)
    project = seed_project(owner)
    put = owner.put(f"/projects/{project}/memories/tone", {"value": "warm", "category": "brand"})
    assert put.status == 201, put
    assert owner.put(f"/projects/{project}/members/bob", {"role": "viewer"}).status == 201
    sign_in(page, console, user)
    entry = page.locator('#memory-list .entry[data-key="tone"]')
    # When the entry is edited and saved
    entry.get_by_role("button", name="Edit").click()
    entry.get_by_label("Value").fill("warm and plain")
    entry.get_by_label("Value").press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(entry.locator(".value")).to_have_text("warm and plain")
    # Then focus is on the entry again
    assert focused(page) == "button#[tone]"
    # When it is forgotten
    entry.get_by_role("button", name="Forget").click()
    page.locator("#confirm").get_by_role("button", name="Forget").click()
    expect(entry).to_have_count(0)
    # Then focus is on the memory panel's heading
    expect(page.locator("#memory-title")).to_be_focused()
    # When a member's role is changed
    page.get_by_role("tab", name="Project").click()
    page.get_by_label("Role of bob").select_option("editor")
    expect(page.get_by_label("Role of bob")).to_have_value("editor")
    page.wait_for_load_state("networkidle")
    # Then focus is on that member's role
    assert focused(page) == "select#[bob]"
    # When a budget is saved
    page.get_by_label("Budget of bob").click()
    bob = page.locator('#usage-members li[data-user="bob"]')
    bob.get_by_label("Turns per day").fill("5")
    bob.get_by_role("button", name="Save budget").click()
    expect(bob).to_contain_text("budget: ")
    page.wait_for_load_state("networkidle")
    # Then focus is on that member's budget
    expect(page.get_by_label("Budget of bob")).to_be_focused()


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


def test_an_api_named_in_a_link_serves_that_page_only_and_is_never_remembered(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a link that names another server as the API, opened once
    elsewhere = "http://127.0.0.1:9"
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{console.url}/?api={elsewhere}&ws=ws://127.0.0.1:9/ws")
    expect(page.get_by_text(elsewhere).first).to_be_visible()
    # When the console is opened again without it, and someone signs in
    sign_in(page, console, user)
    # Then every API request goes to the console's own server, and nothing names the other
    api_requests = [url for url in asked if "/projects" in url]
    assert api_requests and all(url.startswith(console.url) for url in api_requests)
    stored = page.evaluate("JSON.stringify(Object.entries(localStorage))")
    assert "127.0.0.1:9" not in stored


def test_a_link_naming_another_api_never_gets_the_token_a_signed_in_tab_holds(
    page: Page, console: DevServer, user: str
) -> None:
    # Given a signed-in tab, and another server that records what it is sent
    sign_in(page, console, user)
    held = page.evaluate("sessionStorage.getItem('recall.token')")
    assert held
    elsewhere = "http://127.0.0.1:9"
    sent: list[str] = []

    def record(route: Route) -> None:
        sent.append(route.request.headers.get("authorization", ""))
        route.fulfill(status=200, content_type="application/json", body="{}")

    page.route(f"{elsewhere}/**", record)
    # When the same tab opens a link that names that server as the API
    page.goto(f"{console.url}/?api={elsewhere}")
    # Then it asks to sign in for that server, and the token went nowhere
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_text(elsewhere).first).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert all(held not in header for header in sent)
    # And back on its own API the tab is still signed in
    page.goto(console.url)
    expect(page.locator("#console")).to_be_visible()


def test_the_page_names_an_icon_the_server_has_so_the_browser_asks_for_no_missing_one(
    page: Page, console: DevServer, user: str
) -> None:
    # Given the signed-in page (without an icon of its own a browser asks for /favicon.ico,
    # a 404 that it logs as an error on every load)
    sign_in(page, console, user)
    # When the icon it names is fetched
    href = page.evaluate("document.querySelector('link[rel=icon]')?.href ?? null")
    assert href, "the page names no icon"
    answer = page.request.get(href)
    # Then the server has it, as an image
    assert answer.status == 200
    assert answer.headers["content-type"] == "image/svg+xml"


def test_renaming_the_project_keeps_the_open_thread_and_its_members_on_screen(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an owner in a thread, with a member, and the project panel open
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, ["Plan the spring sale"])
    assert owner.put(f"/projects/{project}/members/bob", {"role": "viewer"}).status == 201
    sign_in(page, console, user)
    open_thread(page, "Plan the spring sale")
    page.get_by_role("tab", name="Project").click()
    bob = page.locator('#member-list li[data-user="bob"]')
    expect(bob).to_be_visible()
    # When the project is renamed
    panel = page.get_by_role("tabpanel", name="Project")
    panel.get_by_label("Name", exact=True).fill("Corner Shop EU")
    panel.get_by_role("button", name="Rename").click()
    # Then the new name shows, and the thread and the members are still there
    expect(page.locator("#project-select")).to_contain_text("Corner Shop EU (owner)")
    expect(page.locator("#chat-title")).to_have_text("Plan the spring sale")
    expect(bob).to_be_visible()
    assert owner.get(f"/projects/{project}").body["name"] == "Corner Shop EU"


def test_another_project_opened_with_the_project_panel_open_shows_its_own_members(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given two projects, bob a member of the second only, and the first's panel open
    owner = api(user)
    seed_project(owner, "First shop")
    second = seed_project(owner, "Second shop")
    assert owner.put(f"/projects/{second}/members/bob", {"role": "viewer"}).status == 201
    sign_in(page, console, user)
    page.locator("#project-select").select_option(label="First shop (owner)")
    page.get_by_role("tab", name="Project").click()
    expect(page.locator('#member-list li[data-user="bob"]')).to_have_count(0)
    # When the second opens, then its members show without leaving the panel
    page.locator("#project-select").select_option(label="Second shop (owner)")
    expect(page.locator('#member-list li[data-user="bob"]')).to_be_visible()


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
