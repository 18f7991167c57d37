"""Usage of earlier days and months in the console, a step at a time: the server's clock
cannot be moved, so these tests check the ``date=`` each step sends and what the page makes
of the real answers, which for an earlier period are zeros."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
import re
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import Page, Request, Route, expect
import pytest

from tests.e2e.conftest import Caller, DevServer
from tests.web.conftest import sign_in
from tests.web.test_usage_in_the_console import open_project_panel, open_usage_of_a_new_project

pytestmark = pytest.mark.e2e


def usage_asked(page: Page) -> list[dict[str, str]]:
    """The query of every usage request the page sends from now on, in order."""
    asked: list[dict[str, str]] = []

    def note(request: Request) -> None:
        if "/usage?" in request.url:
            query = parse_qs(urlsplit(request.url).query)
            asked.append({name: values[0] for name, values in query.items()})

    page.on("request", note)
    return asked


def shown_date(page: Page) -> str:
    """The date of the current period's answer, once it is on show."""
    when = page.locator('#usage .usage-when[data-current="true"]')
    expect(when).to_be_visible()
    return when.get_attribute("data-date") or ""


def expect_shown(page: Page, period: str, *, current: bool) -> None:
    """Wait until the answer on show is the one for ``period`` (a day or a month)."""
    when = page.locator("#usage .usage-when")
    expect(when).to_have_attribute("data-date", period)
    expect(when).to_have_attribute("data-current", str(current).lower())


def day_words(day: date) -> str:
    return f"{day:%A} {day.day} {day:%B} {day.year} (UTC)"


def month_before(month: str) -> str:
    first = date.fromisoformat(f"{month}-01")
    return (first - timedelta(days=1)).strftime("%Y-%m")


def test_stepping_back_a_day_asks_for_yesterday_and_shows_what_was_spent_then_without_a_reset(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: an owner who had a turn today, on today's usage
    owner = api(user)
    project = owner.post("/projects", {"name": "Bakery"}).body["id"]
    assert owner.post(f"/projects/{project}/chat", {"message": "Rye or spelt?"}).status == 200
    budget = {"turnsPerDay": 5}
    assert owner.put(f"/projects/{project}/members/{user}/budget", budget).status == 200
    sign_in(page, console, user)
    open_project_panel(page)
    today = shown_date(page)
    usage = page.locator("#usage")
    expect(usage.locator("#usage-shown")).to_have_text(f"Today ({today}, UTC)")
    expect(usage.locator(".usage-mine")).to_have_attribute("data-turns", "1")
    expect(usage.locator('[role="meter"]').first).to_be_visible()
    # Then: nothing later than today, and no way back needed
    expect(page.locator("#usage-later")).to_be_disabled()
    expect(page.locator("#usage-back")).to_be_hidden()
    asked = usage_asked(page)
    yesterday = date.fromisoformat(today) - timedelta(days=1)
    # When
    page.get_by_role("button", name=re.compile(r"^Earlier day")).click()
    # Then: yesterday asked for, shown as spent with no reset and no bars
    expect_shown(page, yesterday.isoformat(), current=False)
    assert asked[-1] == {"period": "day", "date": yesterday.isoformat()}, asked
    expect(usage.locator("#usage-shown")).to_have_text(day_words(yesterday))
    expect(usage.locator(".usage-when")).not_to_contain_text("Resets")
    expect(usage.locator(".usage-when")).to_contain_text("Budgets are the current ones")
    expect(usage.locator(".usage-mine")).to_have_attribute("data-turns", "0")
    expect(usage.locator('[data-meter="turns"]')).to_contain_text("spent")
    expect(usage.locator('[data-meter="turns"]')).not_to_contain_text("left")
    expect(usage.locator('[role="meter"]')).to_have_count(0)
    expect(usage.locator(".usage-mine")).to_contain_text("Your budget in this project now")
    # The owner still sees each member's count for that day, and can set budgets
    row = page.locator(f'#usage-members li[data-user="{user}"]')
    expect(row).to_have_attribute("data-turns", "0")
    expect(row.get_by_text("Set budget")).to_be_visible()
    expect(page.locator("#usage-later")).to_be_enabled()
    expect(page.get_by_role("button", name="Back to today")).to_be_visible()
    # When: one day later, which is today
    page.get_by_role("button", name="Later day: today").click()
    # Then: today again, asked without a date
    expect_shown(page, today, current=True)
    assert asked[-1] == {"period": "day"}, asked
    expect(usage.locator("#usage-shown")).to_have_text(f"Today ({today}, UTC)")
    expect(usage.locator(".usage-when")).to_contain_text("Resets")
    expect(usage.locator(".usage-mine")).to_have_attribute("data-turns", "1")
    expect(page.locator("#usage-later")).to_be_disabled()
    expect(page.locator("#usage-back")).to_be_hidden()


def test_back_to_today_from_three_days_ago(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: three days back
    open_usage_of_a_new_project(page, console, user, api)
    today = date.fromisoformat(shown_date(page))
    earlier = page.locator("#usage-earlier")
    for days in (1, 2, 3):
        earlier.click()
        expect_shown(page, (today - timedelta(days=days)).isoformat(), current=False)
    asked = usage_asked(page)
    # When: with the keyboard
    page.get_by_role("button", name="Back to today").focus()
    page.keyboard.press("Enter")
    # Then
    expect_shown(page, today.isoformat(), current=True)
    assert asked == [{"period": "day"}], asked
    expect(page.locator("#usage-back")).to_be_hidden()
    expect(earlier).to_be_focused()


def test_stepping_a_month_back_and_forth_and_switching_between_day_and_month(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: this month
    open_usage_of_a_new_project(page, console, user, api)
    today = shown_date(page)
    page.locator("#usage-period").get_by_role("button", name="Month").click()
    this_month = today[:7]
    expect_shown(page, this_month, current=True)
    heading = page.locator("#usage-shown")
    expect(heading).to_have_text(f"This month ({this_month}, UTC)")
    expect(page.locator("#usage-later")).to_be_disabled()
    asked = usage_asked(page)
    last_month = month_before(this_month)
    # When
    page.get_by_role("button", name=re.compile(r"^Earlier month")).click()
    # Then
    expect_shown(page, last_month, current=False)
    assert asked[-1] == {"period": "month", "date": last_month}, asked
    expect(heading).to_have_text(f"{date.fromisoformat(last_month + '-01'):%B %Y} (UTC)")
    expect(page.get_by_role("button", name="Back to this month")).to_be_visible()
    # When: by day, from a past month: its last day
    page.locator("#usage-period").get_by_role("button", name="Day").click()
    # Then
    last_day = date.fromisoformat(f"{this_month}-01") - timedelta(days=1)
    expect_shown(page, last_day.isoformat(), current=False)
    assert asked[-1] == {"period": "day", "date": last_day.isoformat()}, asked
    expect(heading).to_have_text(day_words(last_day))
    expect(page.get_by_role("button", name="Back to today")).to_be_visible()
    # When: by month, from a past day: its month
    page.locator("#usage-period").get_by_role("button", name="Month").click()
    # Then
    expect_shown(page, last_month, current=False)
    # When: a month later, which is this month
    page.get_by_role("button", name=re.compile(r"^Later month")).click()
    # Then: asked without a date, and no later
    expect_shown(page, this_month, current=True)
    assert asked[-1] == {"period": "month"}, asked
    expect(page.locator("#usage-later")).to_be_disabled()
    # When: by day, from this month: today
    page.locator("#usage-period").get_by_role("button", name="Day").click()
    # Then
    expect_shown(page, today, current=True)
    assert asked[-1] == {"period": "day"}, asked


def test_quick_clicks_end_on_the_last_period_asked_even_when_an_earlier_answer_comes_last(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: yesterday's answer held back until released
    open_usage_of_a_new_project(page, console, user, api)
    today = date.fromisoformat(shown_date(page))
    yesterday = (today - timedelta(days=1)).isoformat()
    held: list[Route] = []
    page.route(re.compile(rf"/usage\?.*date={yesterday}"), lambda route: held.append(route))
    earlier = page.locator("#usage-earlier")
    # When: two steps back before the first answers
    with page.expect_request(lambda request: f"date={yesterday}" in request.url):
        earlier.click()
    earlier.click()
    two_days_ago = (today - timedelta(days=2)).isoformat()
    expect_shown(page, two_days_ago, current=False)
    # And yesterday's answer arrives last
    assert len(held) == 1
    with page.expect_response(lambda response: f"date={yesterday}" in response.url):
        held[0].continue_()
    page.wait_for_timeout(500)
    # Then: still two days ago
    expect_shown(page, two_days_ago, current=False)
    expect(page.locator("#usage-shown")).to_have_text(day_words(today - timedelta(days=2)))
    # When: three quick clicks
    for _ in range(3):
        earlier.click()
    # Then: five days ago
    five_days_ago = today - timedelta(days=5)
    expect_shown(page, five_days_ago.isoformat(), current=False)
    expect(page.locator("#usage-shown")).to_have_text(day_words(five_days_ago))
    expect(page.locator("#usage-view")).not_to_have_attribute("aria-busy", "true")


def test_an_earlier_day_that_cannot_be_loaded_is_said_in_words(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    open_usage_of_a_new_project(page, console, user, api)
    today = date.fromisoformat(shown_date(page))
    yesterday = (today - timedelta(days=1)).isoformat()
    page.route(re.compile(rf"/usage\?.*date={yesterday}"), lambda route: route.abort())
    # When: the network fails
    page.locator("#usage-earlier").click()
    # Then
    words = page.locator("#usage-view .error-words")
    expect(words).to_contain_text("Could not load usage: Cannot reach the API")
    expect(page.locator("#usage-shown")).to_have_text(day_words(today - timedelta(days=1)))
    # When: the API refuses the date (a date it cannot read, sent in place of the one asked)
    two_days_ago = (today - timedelta(days=2)).isoformat()
    page.route(
        re.compile(rf"/usage\?.*date={two_days_ago}"),
        lambda route: route.continue_(url=route.request.url.replace(two_days_ago, "1969-12-31")),
    )
    page.locator("#usage-earlier").click()
    # Then: the 422 in the API's words
    expect(words).to_contain_text("Could not load usage: A day's date is YYYY-MM-DD.")
    # When: back to today
    page.get_by_role("button", name="Back to today").click()
    # Then
    expect_shown(page, today.isoformat(), current=True)


def test_another_project_opens_on_today(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given: yesterday in one project, the owner's turn today in another
    owner = api(user)
    owner.post("/projects", {"name": "Bakery"})
    dairy = owner.post("/projects", {"name": "Dairy"}).body["id"]
    assert owner.post(f"/projects/{dairy}/chat", {"message": "Butter or cream?"}).status == 200
    sign_in(page, console, user)
    page.locator("#project-select").select_option(label="Bakery (owner)")
    open_project_panel(page)
    today = date.fromisoformat(shown_date(page))
    page.locator("#usage-earlier").click()
    expect_shown(page, (today - timedelta(days=1)).isoformat(), current=False)
    # When
    page.locator("#project-select").select_option(label="Dairy (owner)")
    # Then: that project's today
    expect_shown(page, today.isoformat(), current=True)
    expect(page.locator("#usage .usage-mine")).to_have_attribute("data-turns", "1")
    expect(page.locator("#usage-back")).to_be_hidden()
