"""Usage and budgets in the console: my usage after a turn beside my budget, an owner
setting a member's budget (a bad value answered in the API's words), and that member's
next turn past it refused in the chat in words, once, with nothing sent again until Retry."""

from __future__ import annotations

from collections.abc import Callable
import re

from playwright.sync_api import Browser, Page, WebSocket, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import DESKTOP, PHONE, WAIT_MS, shoot, sign_in

pytestmark = pytest.mark.e2e


def say(page: Page, text: str) -> None:
    """Send ``text`` and wait for its reply to end, answered or failed."""
    before = page.locator(".message.assistant[data-status]").count()
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_label("Message", exact=True).press("Enter")
    expect(page.locator(".message.assistant[data-status]").nth(before)).to_be_visible()


def shoot_usage(page: Page) -> None:
    """The usage section at the top of the side panel, alerts dismissed, on both widths."""
    # At once: a note whose time is up would leave between finding its button and a click.
    page.locator(".alert button").evaluate_all("buttons => buttons.forEach(b => b.click())")
    to_usage = """panel => { panel.scrollTop += document.getElementById("usage")
        .getBoundingClientRect().top - panel.getBoundingClientRect().top - 8; }"""
    page.locator("#side-panel").evaluate(to_usage)
    shoot(page, "desktop-usage")
    page.set_viewport_size(PHONE)
    page.locator("#phone-tabs").get_by_role("button", name="Project").click()
    page.locator("#side-panel").evaluate(to_usage)
    shoot(page, "phone-usage")
    page.set_viewport_size(DESKTOP)


def open_project_panel(page: Page) -> None:
    page.get_by_role("tab", name="Project").click()
    expect(page.locator("#usage .usage-mine")).to_be_visible()


def open_usage_of_a_new_project(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    """A project of the user's, signed in, its usage panel open on today."""
    api(user).post("/projects", {"name": "Bakery"})
    sign_in(page, console, user)
    open_project_panel(page)


def test_my_usage_today_shows_the_turn_i_just_had_and_the_memory_upkeep(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    api(user).post("/projects", {"name": "Bakery"})
    sign_in(page, console, user)
    # When
    say(page, "Which bread sells best?")
    open_project_panel(page)
    # Then
    mine = page.locator("#usage .usage-mine")
    expect(mine).to_have_attribute("data-turns", "1")
    assert int(mine.get_attribute("data-tokens") or 0) > 0
    expect(mine.locator('[data-meter="turns"] .meter-words')).to_have_text("1")
    expect(mine.locator('[data-meter="turns"]')).to_contain_text("no budget")
    expect(mine.locator(".usage-split")).to_contain_text("Input")
    expect(mine.locator(".usage-split")).to_contain_text("Cache read")
    expect(page.locator("#usage .usage-when")).to_contain_text("Resets")
    expect(page.locator("#usage .upkeep")).to_contain_text("model call")
    # An owner, alone here, sees themself among the members
    expect(page.locator(f'#usage-members li[data-user="{user}"]')).to_have_attribute(
        "data-turns", "1"
    )
    # When: this month
    page.locator("#usage-period").get_by_role("button", name="Month").click()
    # Then
    expect(page.locator("#usage .usage-when")).to_have_attribute("data-period", "month")
    expect(mine).to_have_attribute("data-turns", "1")


def test_an_owner_sets_a_members_turns_per_day_and_the_next_turn_past_it_is_refused_in_words(
    browser: Browser, page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: a project with an editor who has had one turn today
    owner = api(user)
    project = owner.post("/projects", {"name": "Bakery"}).body["id"]
    member = f"{user}-editor"
    assert owner.put(f"/projects/{project}/members/{member}", {"role": "editor"}).status == 201
    assert owner.post(f"/projects/{project}/chat", {"message": "Always say rye"}).status == 200
    mine = {"turnsPerDay": 20, "tokensPerDay": 20_000}
    assert owner.put(f"/projects/{project}/members/{user}/budget", mine).status == 200
    assert api(member).post(f"/projects/{project}/chat", {"message": "Rye"}).status == 200
    sign_in(page, console, user)
    open_project_panel(page)
    row = page.locator(f'#usage-members li[data-user="{member}"]')
    expect(row).to_have_attribute("data-turns", "1")
    expect(row).to_contain_text("no budget")
    row.get_by_text("Set budget").click()
    # When: a value the API refuses
    row.get_by_label("Turns per day").fill("0")
    row.get_by_role("button", name="Save budget").click()
    # Then: its words, and nothing saved
    expect(row.locator(".error-words")).to_be_visible()
    expect(row.locator(".error-words")).to_contain_text("Not saved:")
    expect(row.locator(".error-words")).to_contain_text("turnsPerDay")
    members = owner.get(f"/projects/{project}/members").body["members"]
    assert {m["userId"]: m["budget"] for m in members}[member] is None
    # When: two turns a day
    row.get_by_label("Turns per day").fill("2")
    row.get_by_role("button", name="Save budget").click()
    # Then
    expect(row).to_contain_text("budget: 2 turns a day")
    members = owner.get(f"/projects/{project}/members").body["members"]
    budget = {m["userId"]: m["budget"] for m in members}[member]
    assert {name: limit for name, limit in budget.items() if limit is not None} == {
        "turnsPerDay": 2
    }

    # Given: the member, in a browser of their own, counting the turns it sends
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(WAIT_MS)
    theirs = context.new_page()
    errors: list[str] = []
    theirs.on("pageerror", lambda error: errors.append(str(error)))
    sent: list[str] = []  # each turn asked for: a chat frame on the socket, or POST …/chat

    def count_turns(socket: WebSocket) -> None:
        socket.on("framesent", lambda payload: sent.append(str(payload)))

    theirs.on("websocket", count_turns)
    theirs.on("request", lambda request: sent.append(request.url))
    try:
        sign_in(theirs, console, member)
        say(theirs, "Sourdough")  # their second turn today: allowed
        # When: the third
        say(theirs, "Baguette")
        # Then: failed, in words, and sent once
        refused = theirs.locator(".message.assistant").last
        expect(refused).to_have_class(re.compile(r"\bfailed\b"))
        expect(refused).to_have_attribute("data-code", "budget_exceeded")
        words = refused.locator(".error-words")
        expect(words).to_contain_text("You have used your budget of 2 turns today; it resets at")
        theirs.wait_for_timeout(1500)
        turns_sent = [turn for turn in sent if '"action":"chat"' in turn or turn.endswith("/chat")]
        assert len(turns_sent) == 2, turns_sent
        # When: Retry
        refused.get_by_role("button", name="Retry").click()
        # Then: the same refusal, from one more request
        again = theirs.locator(".message.assistant").last
        expect(again.locator(".error-words")).to_contain_text("You have used your budget of 2")
        theirs.wait_for_timeout(1500)
        turns_sent = [turn for turn in sent if '"action":"chat"' in turn or turn.endswith("/chat")]
        assert len(turns_sent) == 3, turns_sent
        # And their own usage says none remain, without the members' list an owner sees
        open_project_panel(theirs)
        expect(theirs.locator('#usage [data-meter="turns"]')).to_contain_text("2 of 2")
        expect(theirs.locator('#usage [data-meter="turns"]')).to_contain_text("0 left")
        expect(theirs.locator("#usage-members")).to_have_count(0)
        expect(theirs.locator("#usage .upkeep")).to_be_visible()
    finally:
        context.close()
    assert errors == [], errors

    # When: the owner looks again
    page.locator("#usage-period").get_by_role("button", name="Day").click()
    # Then
    expect(row).to_have_attribute("data-turns", "2")
    shoot_usage(page)
    # When: the owner clears the budget
    row.get_by_text("Set budget").click()
    row.get_by_role("button", name="No limits").click()
    # Then
    expect(row).to_contain_text("no budget")
