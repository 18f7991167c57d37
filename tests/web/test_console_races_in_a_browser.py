"""The console when answers come late or the person acts on themself: a thread's answer
that lands after another thread opened, a reply that ends after its thread was opened
again, an owner who changes their own role. Each test signs in as its own user."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import sign_in
from tests.web.test_console_edges_in_a_browser import held_until_released, wait_for
from tests.web.test_console_in_a_browser import open_thread, seed_project, seed_turns

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
    held[0].continue_()
    page.wait_for_load_state("networkidle")
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
    held[0].continue_()
    page.wait_for_load_state("networkidle")
    # Then the other thread shows only its own messages
    expect(page.locator(".message.user .text")).to_have_text(["Short thread"])
    expect(page.get_by_role("button", name="Load older messages")).to_be_hidden()
