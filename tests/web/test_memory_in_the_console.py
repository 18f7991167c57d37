"""The Memory panel in a browser: entries edited, forgotten and added by hand, and each
one's history, latest changes first and earlier ones on asking."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import PHONE, shoot, sign_in
from tests.web.helpers import seed_project

pytestmark = pytest.mark.e2e


def test_memory_entries_are_edited_forgotten_and_their_history_shown(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    owner = api(user)
    project = seed_project(owner)
    put = owner.put(
        f"/projects/{project}/memories/brand_voice",
        {"value": "warm and brief", "category": "brand"},
    )
    assert put.status == 201, put
    sign_in(page, console, user)
    entry = page.locator('#memory-list .entry[data-key="brand_voice"]')
    expect(entry).to_contain_text("warm and brief")
    # When: edited
    entry.get_by_role("button", name="Edit").click()
    entry.get_by_label("Value").fill("warm, brief and plain")
    entry.get_by_role("button", name="Save").click()
    # Then
    expect(entry.locator(".value")).to_have_text("warm, brief and plain")
    # When: its history opened
    entry.get_by_role("button", name="History").click()
    # Then
    history = entry.get_by_role("list", name="History of brand_voice")
    expect(history.locator("li")).to_have_count(2)
    expect(history.locator('li[data-action="created"]')).to_contain_text("warm and brief")
    expect(history.locator('li[data-action="updated"]')).to_contain_text("was: warm and brief")
    shoot(page, "desktop-memory-history")
    page.set_viewport_size(PHONE)
    page.locator("#phone-tabs").get_by_role("button", name="Memory").click()
    expect(entry).to_be_visible()
    shoot(page, "phone-memory")
    # When: forgotten, after confirming
    entry.get_by_role("button", name="Forget").click()
    page.locator("#confirm").get_by_role("button", name="Forget").click()
    # Then
    expect(entry).to_have_count(0)
    expect(page.locator("#memory-count")).to_have_text("0 of 50")
    assert owner.get(f"/projects/{project}/memories").body["memories"] == []


def test_a_long_history_shows_its_latest_changes_and_earlier_ones_on_asking(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an entry changed more often than the API gives in one page
    owner = api(user)
    project = seed_project(owner)
    changes = 105
    for n in range(changes):
        body = {"value": f"value {n}", "category": "context"}
        put = owner.put(f"/projects/{project}/memories/churn", body)
        assert put.status in (200, 201), put
    sign_in(page, console, user)
    entry = page.locator('#memory-list .entry[data-key="churn"]')
    # When its history is opened
    entry.get_by_role("button", name="History").click()
    # Then the latest 100 show, the newest last
    history = entry.get_by_role("list", name="History of churn")
    expect(history.locator("li")).to_have_count(100)
    expect(history.locator("li").last).to_contain_text(f"now: value {changes - 1}")
    # When the earlier changes are asked for, then the first come above, and no more are left
    entry.get_by_role("button", name="Earlier changes").click()
    expect(history.locator("li")).to_have_count(changes)
    expect(history.locator("li").first).to_contain_text("now: value 0")
    expect(entry.get_by_role("button", name="Earlier changes")).to_be_hidden()


def test_an_entry_is_added_from_the_memory_panel(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    project = seed_project(api(user))
    sign_in(page, console, user)
    # When
    page.get_by_text("Add an entry").click()
    page.get_by_label("Key").fill("no_emoji")
    page.get_by_label("Value", exact=True).fill("Never use emoji")
    page.get_by_label("Category").select_option("forbidden")
    page.get_by_role("button", name="Save entry").click()
    # Then
    entry = page.locator('#memory-list .entry[data-key="no_emoji"]')
    expect(entry).to_contain_text("Never use emoji")
    expect(page.locator('#memory-list section[aria-label="forbidden"]')).to_contain_text("no_emoji")
    stored = api(user).get(f"/projects/{project}/memories").body["memories"]
    assert [(m["key"], m["category"], m["source"]) for m in stored] == [
        ("no_emoji", "forbidden", "explicit")
    ]
