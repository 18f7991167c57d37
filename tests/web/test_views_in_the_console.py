"""Moving between views keeps what is on show: a side panel shown again, by its own tab or a
phone's, is the one the person left, with a form they opened still open and what they typed
in it still there. The panel is kept current as things change (a turn, another thread or
project), so showing it again asks the API for nothing; the Project panel keeps the open
thread's members through a rename, and shows another project's when it opens."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, Request, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import PHONE, sign_in
from tests.web.helpers import open_thread, seed_project, seed_turns

pytestmark = pytest.mark.e2e


def reads(page: Page) -> list[str]:
    """Every GET the page sends from now on."""
    sent: list[str] = []

    def note(request: Request) -> None:
        if request.method == "GET" and "/projects/" in request.url:
            sent.append(request.url)

    page.on("request", note)
    return sent


def test_a_budget_being_typed_on_a_phone_survives_a_look_at_the_chat(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: an owner on a phone, a member's budget form open with a value typed in it
    owner = api(user)
    project = seed_project(owner)
    member = f"{user}-editor"
    assert owner.put(f"/projects/{project}/members/{member}", {"role": "editor"}).status == 201
    page.set_viewport_size(PHONE)
    sign_in(page, console, user)
    tabs = page.locator("#phone-tabs")
    tabs.get_by_role("button", name="Project").click()
    row = page.locator(f'#usage-members li[data-user="{member}"]')
    row.get_by_text("Set budget").click()
    row.get_by_label("Turns per day").fill("7")
    sent = reads(page)
    # When: a look at the chat, and back
    tabs.get_by_role("button", name="Chat").click()
    tabs.get_by_role("button", name="Project").click()
    expect(page.locator("#usage-view")).not_to_have_attribute("aria-busy", "true")
    # Then: the form as it was left
    expect(row.get_by_label("Turns per day")).to_be_visible()
    expect(row.get_by_label("Turns per day")).to_have_value("7")
    assert sent == [], sent


def test_the_model_views_tab_clicked_again_keeps_the_thread_settings_being_typed(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: the thread's own settings open, a temperature typed and not saved
    owner = api(user)
    project = seed_project(owner)
    seed_turns(owner, project, ["Which rye sells best?"])
    sign_in(page, console, user)
    open_thread(page, "Which rye sells best?")
    tab = page.get_by_role("tab", name="What the model sees")
    tab.click()
    expect(page.locator('#context-view [data-layer="window"]')).to_be_visible()
    page.locator("#thread-settings-box summary").click()
    page.get_by_label("Temperature (0–1)", exact=True).fill("0.9")
    sent = reads(page)
    # When: its tab, once more
    tab.click()
    expect(page.locator("#context-view")).not_to_have_attribute("aria-busy", "true")
    # Then
    expect(page.get_by_label("Temperature (0–1)", exact=True)).to_have_value("0.9")
    assert sent == [], sent


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
