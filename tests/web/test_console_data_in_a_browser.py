"""The console's "Your data" controls in headless Chromium against make dev's server:
Export saves the JSON document (or, past EXPORT_MAX_BYTES, the JSON Lines its link
points at), Import shows its progress until done and the threads appear, and Erase asks
first, then leaves the project."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import json
from pathlib import Path

from playwright.sync_api import Page, expect
import pytest

from tests.e2e.conftest import Caller, DevServer, dev_process
from tests.web.conftest import sign_in

pytestmark = pytest.mark.e2e


def seed(owner: Caller, *messages: str) -> str:
    """A project of the owner's with one thread of these turns."""
    project = str(owner.post("/projects", {"name": "Corner Shop"}).body["id"])
    thread = None
    for message in messages:
        body = {"message": message, **({"conversationId": thread} if thread else {})}
        reply = owner.post(f"/projects/{project}/chat", body)
        assert reply.status == 200, reply
        thread = reply.body["conversation"]["id"]
    return project


def exported(page: Page) -> bytes:
    """Click Export and read what the browser saved."""
    page.get_by_role("tab", name="Project").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export (JSON)").click()
    return Path(download.value.path()).read_bytes()


def test_export_saves_the_project_as_one_json_document(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    project = seed(api(user), "Always keep the header dark")
    sign_in(page, console, user)
    # When
    saved = json.loads(exported(page))
    # Then
    assert (saved["format"], saved["projectId"], saved["userId"]) == (
        "recall.export",
        project,
        user,
    )
    assert [thread["title"] for thread in saved["conversations"]] == ["Always keep the header dark"]
    assert saved["conversations"][0]["messages"][0]["content"] == "Always keep the header dark"


@pytest.fixture(scope="module")
def large_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """make dev's server where every export but the smallest is a large one."""
    environment = {"EXPORT_MAX_BYTES": "1000", "LOCAL_SCHEDULE_SECONDS": "0"}
    with dev_process(environment, tmp_path_factory.mktemp("large-exports")) as server:
        yield server


def test_a_large_export_saves_the_json_lines_its_link_points_at(
    page: Page, large_console: DevServer, user: str
) -> None:
    # Given a project past EXPORT_MAX_BYTES
    seed(Caller(large_console.url, user), "Plan the spring sale " + "x" * 600, "And the summer one")
    sign_in(page, large_console, user)
    # When
    saved = exported(page)
    # Then
    lines = [json.loads(line) for line in saved.decode().splitlines()]
    assert lines[0]["format"] == "recall.export.jsonl" and lines[0]["userId"] == user
    assert [line["type"] for line in lines[1:4]] == ["conversation", "message", "message"]
    expect(page.locator("#alerts")).to_contain_text("Your export is large")


def test_an_import_shows_its_progress_until_done_and_its_threads_appear(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given
    seed(api(user))
    sign_in(page, console, user)
    threads = {
        "format": "threads",
        "threads": [
            {
                "title": title,
                "messages": [
                    {"role": "user", "content": f"{title}?", "createdAt": "2025-03-01T09:00:00Z"},
                    {"role": "assistant", "content": "Yes.", "createdAt": "2025-03-01T09:00:04Z"},
                ],
            }
            for title in ("Launch plan", "Supplier list")
        ],
    }
    page.get_by_role("tab", name="Project").click()
    # The input is enabled once the project has loaded; a file chosen before that is dropped.
    expect(page.locator("#import-file")).to_be_enabled()
    # When
    with page.expect_request(lambda sent: sent.method == "POST" and "/import" in sent.url) as sent:
        page.set_input_files(
            "#import-file",
            files=[
                {
                    "name": "threads.json",
                    "mimeType": "application/json",
                    "buffer": json.dumps(threads).encode(),
                }
            ],
        )
    # Then the page sends the file's document, and follows the import until it is done
    assert sent.value.post_data_json == threads
    expect(page.locator("#import-progress")).to_have_text(
        "Import done: 2 threads, 4 messages, 0 memory entries, 0 presets."
    )
    for title in ("Launch plan", "Supplier list"):
        expect(page.locator(".thread", has_text=title)).to_have_count(1)


def test_erasing_my_data_asks_first_then_leaves_the_project(
    page: Page, console: DevServer, user: str, api: Callable[[str], Caller]
) -> None:
    # Given an editor's thread in someone else's project
    owner = api(f"{user}-owner")
    project = seed(owner)
    assert owner.put(f"/projects/{project}/members/{user}", {"role": "editor"}).status == 201
    seed_thread = api(user).post(f"/projects/{project}/chat", {"message": "Plan the sale"})
    assert seed_thread.status == 200, seed_thread
    sign_in(page, console, user)
    expect(page.locator("#project-select")).to_contain_text("Corner Shop (editor)")
    page.get_by_role("tab", name="Project").click()
    erase = page.get_by_role("button", name="Erase my data in this project")
    erasures: list[str] = []
    page.on("request", lambda sent: sent.method == "DELETE" and erasures.append(sent.url))
    # When cancelled, nothing is sent
    erase.click()
    expect(page.locator("#confirm-text")).to_contain_text("This cannot be undone")
    page.locator("#confirm").get_by_role("button", name="Cancel").click()
    expect(page.locator("#confirm")).to_be_hidden()
    page.wait_for_timeout(300)  # a request the cancel sent would have gone by now
    assert erasures == []
    assert api(user).get(f"/projects/{project}/conversations").status == 200
    # When confirmed
    erase.click()
    page.locator("#confirm").get_by_role("button", name="Erase").click()
    # Then
    expect(page.locator("#alerts")).to_contain_text("Your data in Corner Shop is erased")
    assert erasures == [f"{console.url}/projects/{project}/me"]
    expect(page.locator("#project-select")).not_to_contain_text("Corner Shop")
    assert api(user).get(f"/projects/{project}/conversations").status == 403
    members = owner.get(f"/projects/{project}/members").body["members"]
    assert [member["userId"] for member in members] == [owner.sub]
