"""What the screen keeps, and what a link may change: long unbroken words stay within a
phone's width, focus stays on what was changed when a list is drawn again, an API named in
a link serves that page only and never gets the token another tab holds, and the icon the
page names is one the server has."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, Route, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import PHONE, TAKEN, sign_in
from tests.web.helpers import seed_project, seed_turns

pytestmark = pytest.mark.e2e


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
    shown = {
        "Memory": '#memory-list .entry[data-key="long_word"]',
        "Model view": '#context-view [data-layer="window"]',
        "Project": "#usage .usage-mine",
    }
    for view, content in shown.items():
        tabs.get_by_role("button", name=view).click()
        expect(page.locator(content)).to_be_visible()
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
    # Then focus is on that member's role, once the list is drawn again
    expect(page.get_by_label("Role of bob")).to_be_focused()
    assert focused(page) == "select#[bob]"
    # When a budget is saved (in the usage drawn again for bob's new role)
    expect(page.locator('#usage-members li[data-user="bob"]')).to_contain_text("editor")
    page.get_by_label("Budget of bob").click()
    bob = page.locator('#usage-members li[data-user="bob"]')
    bob.get_by_label("Turns per day").fill("5")
    bob.get_by_role("button", name="Save budget").click()
    expect(bob).to_contain_text("budget: ")
    # Then focus is on that member's budget
    expect(page.get_by_label("Budget of bob")).to_be_focused()


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
