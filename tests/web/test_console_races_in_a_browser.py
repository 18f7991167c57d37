"""The console when answers come late, the person acts on themself, or two things look
alike: a thread's answer that lands after another thread opened, a reply that ends after
its thread was opened again, an owner who changes their own role, two entries with one
key, right-to-left text. Each test signs in as its own user."""

from __future__ import annotations

from collections.abc import Callable
import re
import uuid

from playwright.sync_api import Page, Route, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import TAKEN, sign_in
from tests.web.helpers import (
    HeldReplies,
    answered,
    composer,
    held_until_released,
    open_thread,
    seed_project,
    seed_turns,
    wait_for,
)

pytestmark = pytest.mark.e2e


def test_a_late_answer_for_another_thread_is_not_drawn(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given two threads, the first one slow to open
    owner = api(user)
    project = seed_project(owner)
    first = seed_turns(owner, project, ["Only in the first"])
    seed_turns(owner, project, ["Only in the second"])
    sign_in(page, console, user)
    held = held_until_released(page, rf".*/conversations/{first}\?limit=.*")
    # When the first is clicked, then the second, and the first answers last
    page.locator(".thread", has_text="Only in the first").click()
    wait_for(page, held)
    open_thread(page, "Only in the second")
    answered(page, held)
    # Then the second stays open
    expect(page.locator("#chat-title")).to_have_text("Only in the second")
    expect(page.locator(".message.user .text")).to_have_text(["Only in the second"])
    expect(page.locator('.thread[aria-current="true"]')).to_contain_text("Only in the second")


def test_a_late_older_page_of_another_thread_is_not_drawn(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread with an older page, and another thread
    owner = api(user)
    project = seed_project(owner)
    long = seed_turns(owner, project, [f"Note {n}" for n in range(27)])
    seed_turns(owner, project, ["Short thread"])
    sign_in(page, console, user)
    open_thread(page, "Note 0")
    held = held_until_released(page, rf".*/conversations/{long}\?limit=\d+&cursor=.*")
    # When its older page is asked, the other thread opens, and the older page answers last
    page.get_by_role("button", name="Load older messages").click()
    wait_for(page, held)
    open_thread(page, "Short thread")
    answered(page, held)
    # Then the other thread shows only its own messages
    expect(page.locator(".message.user .text")).to_have_text(["Short thread"])
    expect(page.get_by_role("button", name="Load older messages")).to_be_hidden()


def test_a_reply_that_ends_after_its_thread_was_opened_again_is_shown(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread whose second opening reads the thread as it was before the turn
    owner = api(user)
    thread = seed_turns(owner, seed_project(owner), ["Earlier turn"])
    answers: list[str] = []

    def as_before(route: Route) -> None:
        if not answers:
            answers.append(route.fetch().text())
            route.fulfill(body=answers[0], content_type="application/json")
        elif len(answers) == 1:
            answers.append("stale")
            route.fulfill(body=answers[0], content_type="application/json")
        else:
            route.continue_()

    page.route(re.compile(rf".*/conversations/{thread}\?limit=\d+$"), as_before)
    replies = HeldReplies(page)
    sign_in(page, console, user)
    open_thread(page, "Earlier turn")
    # When a reply streams, the same thread is clicked in the list, and then the reply ends
    composer(page).fill("New question")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-streaming="true"]')).to_be_visible()
    page.locator(".thread", has_text="Earlier turn").click()
    expect(page.locator(".message.user .text")).to_have_text(["Earlier turn"])
    replies.release()
    # Then the turn is on screen
    expect(page.locator(".message.user .text")).to_have_text(["Earlier turn", "New question"])
    expect(page.locator(".message.assistant")).to_have_count(2)
    expect(page.locator("#send")).to_be_enabled()


def test_a_thread_clicked_while_a_turn_starts_opens_and_stays_open(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread in the list, slow to open, and a new chat's turn whose frames wait
    owner = api(user)
    project = seed_project(owner)
    other = seed_turns(owner, project, ["Only in the other thread"])
    replies = HeldReplies(page, start_passes=False)
    sign_in(page, console, user)
    held = held_until_released(page, rf".*/conversations/{other}\?limit=.*")
    composer(page).fill("Plan the spring sale")
    composer(page).press("Enter")
    expect(page.locator('.message.assistant[data-streaming="true"]')).to_be_visible()
    # When the other thread is clicked, the turn's start (and the rest) arrives, and then the
    # clicked thread's answer
    page.locator(".thread", has_text="Only in the other thread").click()
    wait_for(page, held)
    replies.release()
    expect(page.locator('.message.assistant[data-status="complete"]')).to_have_count(1)
    answered(page, held)
    # Then the clicked thread is open, and stays so
    expect(page.locator("#chat-title")).to_have_text("Only in the other thread")
    expect(page.locator(".message.user .text")).to_have_text(["Only in the other thread"])
    expect(page.locator("#chat-title")).to_have_text("Only in the other thread")
    expect(page.locator('.thread[aria-current="true"]')).to_contain_text("Only in the other thread")


def test_an_owner_who_makes_themself_a_viewer_loses_the_owners_controls_at_once(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a project with two owners, its panel open
    owner = api(user)
    project = seed_project(owner, "Two owners")
    assert owner.put(f"/projects/{project}/members/{user}-co", {"role": "owner"}).status == 201
    sign_in(page, console, user)
    page.get_by_role("tab", name="Project").click()
    expect(page.get_by_label(f"Role of {user}", exact=True)).to_be_enabled()
    # When they make themself a viewer
    page.get_by_label(f"Role of {user}", exact=True).select_option("viewer")
    # Then the page is a viewer's
    expect(page.locator("#who-role")).to_have_text("viewer")
    expect(page.locator("#project-select option:checked")).to_have_text("Two owners (viewer)")
    expect(composer(page)).to_be_disabled()
    expect(page.get_by_label(f"Role of {user}", exact=True)).to_be_disabled()
    for remove in page.locator("#member-list button").all():
        expect(remove).to_be_disabled()
    expect(page.locator("#member-user")).to_be_disabled()


def test_an_owner_who_removes_themself_no_longer_has_the_project_open(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a project with two owners, and another project of their own
    owner = api(user)
    project = seed_project(owner, "Two owners")
    seed_project(owner, "Mine")
    assert owner.put(f"/projects/{project}/members/{user}-co", {"role": "owner"}).status == 201
    sign_in(page, console, user)
    page.locator("#project-select").select_option(project)
    page.get_by_role("tab", name="Project").click()
    # When they remove themself
    page.locator(f'#member-list li[data-user="{user}"]').get_by_role("button").click()
    page.locator("#confirm").get_by_role("button", name="Remove").click()
    # Then the project is gone from the picker, and their other one is open
    expect(page.locator("#project-select option")).to_have_text(["Mine (owner)"])
    expect(page.locator("#alerts")).to_contain_text("You have left Two owners.")
    expect(page.locator(f'#member-list li[data-user="{user}-co"]')).to_have_count(0)


def test_two_entries_with_one_key_are_edited_each_in_its_own_form(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a project entry and a thread entry with the same key
    owner = api(user)
    project = seed_project(owner)
    thread = seed_turns(owner, project, ["Hello"])
    for scope, value in (("persistent", "formal"), ("thread", "casual here")):
        body = {"value": value, "category": "preferences", "scope": scope}
        if scope == "thread":
            body["conversationId"] = thread
        assert owner.put(f"/projects/{project}/memories/tone", body).status == 201
    sign_in(page, console, user)
    open_thread(page, "Hello")
    entries = page.locator("#memory-list .entry")
    expect(entries).to_have_count(2)
    # When both are edited at once, and the thread entry's Value is clicked by its label
    for scope in ("persistent", "thread"):
        page.locator(f'.entry[data-scope="{scope}"]').get_by_role("button", name="Edit").click()
    duplicates = page.evaluate(
        """() => { const ids = [...document.querySelectorAll('[id]')].map(n => n.id);
                   return ids.filter((id, i) => ids.indexOf(id) !== i); }"""
    )
    assert duplicates == []
    mine = page.locator('.entry[data-scope="thread"]')
    mine.locator("label", has_text="Value").click()
    page.keyboard.press("Control+A")
    page.keyboard.type("typed for the thread")
    mine.get_by_role("button", name="Save").click()
    # Then only the thread entry changed
    expect(mine.locator(".value")).to_have_text("typed for the thread")
    memories = owner.get(f"/projects/{project}/memories?conversationId={thread}").body["memories"]
    assert sorted((entry["scope"], entry["value"]) for entry in memories) == [
        ("persistent", "formal"),
        ("thread", "typed for the thread"),
    ]


ARABIC = "هل يمكنك مساعدتي في كتابة رسالة؟ شكرا!"


def test_right_to_left_text_is_laid_out_right_to_left(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an Arabic thread and memory entry
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, [ARABIC])
    put = owner.put(f"/projects/{project}/memories/tone", {"value": ARABIC, "category": "brand"})
    assert put.status == 201, put
    sign_in(page, console, user)
    # When the thread opens and Arabic is typed
    page.locator(".thread").first.click()
    expect(page.locator(".message.user .text")).to_have_text([ARABIC])
    composer(page).fill("مرحبا، كيف حالك؟")
    # Then each runs right to left, and English stays left to right
    for selector in (
        ".message.user .text",
        "#chat-title",
        ".thread .title",
        "#memory-list .entry .value",
        "#composer-input",
    ):
        # Polled: the memory panel may draw its list again meanwhile
        expect(page.locator(selector).first).to_have_css("direction", "rtl")
    page.locator(".message.user").first.screenshot(path=str(TAKEN / "rtl-message.png"))
    composer(page).fill("Hello")
    expect(composer(page)).to_have_css("direction", "ltr")


def test_the_thread_list_keeps_what_more_loaded_after_an_action(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given 51 threads, all listed after More
    owner = api(user)
    project = seed_project(owner)
    for n in range(51):
        assert owner.post(f"/projects/{project}/conversations", {"title": f"T{n}"}).status == 201
    sign_in(page, console, user)
    threads = page.locator("#thread-list .thread")
    expect(threads).to_have_count(50)
    page.get_by_role("button", name="More").click()
    expect(threads).to_have_count(51)
    # When the oldest is opened and archived
    page.locator(".thread", has_text="T0").click()
    expect(page.locator("#chat-title")).to_have_text("T0")
    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#alerts")).to_contain_text("archived")
    # Then the list still holds the other fifty, the second oldest too
    expect(threads).to_have_count(50)
    expect(page.locator(".thread", has_text="T1").first).to_be_visible()
    expect(page.get_by_role("button", name="More")).to_be_hidden()


def test_a_deleted_threads_own_memory_leaves_the_memory_panel(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread with a thread-only entry, open
    owner = api(user)
    project = seed_project(owner)
    thread = seed_turns(owner, project, ["Hello"])
    body = {"value": "casual", "category": "preferences", "scope": "thread"}
    body["conversationId"] = thread
    assert owner.put(f"/projects/{project}/memories/tone", body).status == 201
    sign_in(page, console, user)
    open_thread(page, "Hello")
    expect(page.locator('#memory-list .entry[data-scope="thread"]')).to_have_count(1)
    # When it is deleted
    page.get_by_role("button", name="Delete").click()
    page.locator("#confirm").get_by_role("button", name="Delete").click()
    # Then its entry is no longer listed
    expect(page.locator("#chat-title")).to_have_text("New chat")
    expect(page.locator("#memory-list .entry")).to_have_count(0)


def test_the_messages_box_shows_its_whole_focus_ring(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given a thread
    owner = api(user)
    seed_turns(owner, seed_project(owner), ["Hello"])
    sign_in(page, console, user)
    open_thread(page, "Hello")
    # When the messages box gets focus from the keyboard
    page.get_by_role("button", name="Delete").focus()
    page.keyboard.press("Tab")
    expect(page.locator("#messages")).to_be_focused()
    # Then its ring is drawn inside its box, which its panel does not clip
    ring = page.locator("#messages").evaluate(
        """n => { const s = getComputedStyle(n);
                  return {style: s.outlineStyle, width: parseFloat(s.outlineWidth),
                          offset: parseFloat(s.outlineOffset)}; }"""
    )
    assert ring["style"] == "solid" and ring["width"] > 0, ring
    assert ring["offset"] + ring["width"] <= 0, ring
    page.locator("#chat-panel").screenshot(path=str(TAKEN / "messages-focus.png"))


def test_a_long_user_id_leaves_the_header_room_for_the_project_picker(
    page: Page, console: DevServer, api: Callable[[str], Caller]
) -> None:
    # Given the longest user id the sign-in form takes, of wide letters, and a long project name
    user = "w" * 54 + uuid.uuid4().hex[:10]
    seed_project(api(user), "P" * 120)
    # When they sign in at 1280 px
    sign_in(page, console, user)
    # Then the header fits, the picker keeps its room, the buttons stay on one line, and the
    # id is cut, its title holding it whole
    header = page.locator("header.top")
    fits = header.evaluate("n => n.scrollWidth <= n.clientWidth")
    assert fits
    picker = page.locator("#project-select").bounding_box()
    name = page.locator("#who-name").bounding_box()
    new = page.get_by_role("button", name="New project").bounding_box()
    out = page.get_by_role("button", name="Sign out").bounding_box()
    assert picker and name and new and out
    assert picker["width"] >= 250, picker
    assert new["height"] == out["height"], (new, out)
    assert name["x"] + name["width"] <= out["x"], (name, out)
    assert page.locator("#who-name").get_attribute("title") == f"{user} (local)"
    page.locator("header.top").screenshot(path=str(TAKEN / "header-long-user.png"))
