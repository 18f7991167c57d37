"""Every sample event in ``events/`` reaches its handler's success path against the seeded
demo project, and every HTTP route and function in ``template.yaml`` has one. A file's
name says its function: the part before the first ``-`` is the function's ``CodeUri``
directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest

from local import embedded, runtime, template
from local.seed import DEMO_USER, DemoIds, seed_demo

EVENTS = template.ROOT / "events"
EVENT_FILES = sorted(EVENTS.glob("*.json"))

# The status each event answers over the seeded demo project. Creates are 201 and deletes
# 204; the two PUTs answer 200 because the seed already holds what they set (the memory
# entry, and the member as a viewer whom the event makes an editor); a chat turn and
# clear-context are actions, not creates, so 200.
EXPECTED_STATUS = {
    "chat-clear-context.json": 200,
    "chat-context.json": 200,
    "chat-turn.json": 200,
    "conversations-create.json": 201,
    "conversations-delete.json": 204,
    "conversations-get.json": 200,
    "conversations-list.json": 200,
    "conversations-update.json": 200,
    "memories-delete.json": 204,
    "memories-history.json": 200,
    "memories-list.json": 200,
    "memories-put.json": 200,
    "projects-create.json": 201,
    "projects-get.json": 200,
    "projects-list-members.json": 200,
    "projects-list.json": 200,
    "projects-openapi.json": 200,
    "projects-remove-member.json": 204,
    "projects-set-member.json": 200,
    "projects-update.json": 200,
}


def function_of(event_file: Path) -> str:
    directory = event_file.name.split("-", 1)[0]
    by_directory = {path.name: name for name, path in template.code_dirs().items()}
    assert directory in by_directory, (
        f"{event_file.name}: no function has CodeUri functions/{directory}"
    )
    return by_directory[directory]


def load(event_file: Path) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(event_file.read_text())
    return event


@pytest.fixture(autouse=True)
def demo(embedded_store: embedded.EmbeddedStore) -> DemoIds:
    """What the events name, there before each event: a delete event removes its thread,
    memory entry or member, and the next event needs them back."""
    return seed_demo()


def invoke(event_file: Path) -> dict[str, Any]:
    response: dict[str, Any] = runtime.invoke(function_of(event_file), load(event_file))
    return response


def test_events_cover_every_function_in_the_template() -> None:
    # Given
    named = {function_of(path) for path in EVENT_FILES}
    # When
    missing = sorted(set(template.code_dirs()) - named)
    # Then
    assert EVENT_FILES, f"no event files in {EVENTS}"
    assert not missing, f"functions without a sample event in events/: {missing}"


def test_every_event_file_has_its_expected_status() -> None:
    # Given
    files = {path.name for path in EVENT_FILES}
    # When
    unlisted = sorted(files - set(EXPECTED_STATUS))
    stale = sorted(set(EXPECTED_STATUS) - files)
    # Then
    assert not unlisted, f"say which status these events answer in EXPECTED_STATUS: {unlisted}"
    assert not stale, f"EXPECTED_STATUS names event files that are gone: {stale}"


@pytest.mark.parametrize("event_file", EVENT_FILES, ids=lambda path: path.name)
def test_event_file_reaches_its_success_path(event_file: Path) -> None:
    # Given
    function = function_of(event_file)
    assert (template.code_dirs()[function] / "app.py").is_file(), (
        f"{event_file.name} targets {function}, which has no app.py"
    )
    # When
    response = invoke(event_file)
    # Then
    assert response["statusCode"] == EXPECTED_STATUS[event_file.name], response
    if response["statusCode"] == 204:
        assert not response.get("body"), response
    else:
        body = json.loads(response["body"])
        assert isinstance(body, dict), body
        assert "error" not in body, body


def test_seeding_again_changes_nothing_the_events_read() -> None:
    # Given
    readers = [
        EVENTS / "projects-get.json",
        EVENTS / "projects-list-members.json",
        EVENTS / "conversations-get.json",
        EVENTS / "memories-list.json",
        EVENTS / "memories-history.json",
    ]
    before = [invoke(path)["body"] for path in readers]
    # When
    seed_demo()
    # Then
    assert [invoke(path)["body"] for path in readers] == before


def test_an_event_that_deletes_finds_its_item_again_after_reseeding() -> None:
    # Given
    delete, history = EVENTS / "memories-delete.json", EVENTS / "memories-history.json"
    assert invoke(delete)["statusCode"] == 204
    assert invoke(delete)["statusCode"] == 404
    # When
    seed_demo()
    # Then
    assert invoke(delete)["statusCode"] == 204
    actions = [record["action"] for record in json.loads(invoke(history)["body"])["history"]]
    assert actions[-3:] == ["deleted", "created", "deleted"]


def test_make_invoke_prints_only_the_response_on_stdout() -> None:
    """``make invoke`` output is meant to be piped, so logs must stay on stderr. It runs
    with a shell's environment: none of the AWS or Powertools variables this test session
    set (its WARNING log level would hide the INFO lines that must not reach stdout)."""
    # Given
    event_file = EVENTS / "projects-remove-member.json"
    shell = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "POWERTOOLS_"))
    }
    # When
    run = subprocess.run(  # noqa: S603 (our own interpreter and module, fixed arguments)
        [sys.executable, "-m", "local.invoke", function_of(event_file), str(event_file)],
        cwd=template.ROOT,
        env=shell,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Then
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["statusCode"] == EXPECTED_STATUS[event_file.name], run.stdout


@pytest.mark.parametrize("event_file", EVENT_FILES, ids=lambda path: path.name)
def test_event_file_is_the_event_api_gateway_sends_for_its_route(event_file: Path) -> None:
    # Given
    event = load(event_file)
    method = event["requestContext"]["http"]["method"]
    # When
    found = runtime.match_route(method, event["rawPath"])
    # Then
    assert found, f"{event_file.name}: no template route for {method} {event['rawPath']}"
    route, path_parameters = found
    assert route.function == function_of(event_file), "the file name names another function"
    assert event["version"] == "2.0"
    assert event["routeKey"] == event["requestContext"]["routeKey"] == route.route_key
    assert event["requestContext"]["http"]["path"] == event["rawPath"]
    assert event.get("pathParameters", {}) == path_parameters
    if "authorizer" in event["requestContext"]:
        assert event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] == DEMO_USER
    if "body" in event:
        assert event["headers"]["content-type"] == "application/json"
        assert event["isBase64Encoded"] is False
        json.loads(event["body"])
    for name in ("projectId", "conversationId"):
        if name in path_parameters:
            assert len(path_parameters[name]) == 26, f"{name} should look like a ULID"


def test_every_http_route_in_the_template_has_an_event_file() -> None:
    # Given
    covered = {load(path)["routeKey"] for path in EVENT_FILES}
    # When
    missing = sorted(
        f"{route.route_key} ({route.function})"
        for route in template.routes()
        if route.route_key not in covered
    )
    # Then
    assert not missing, f"routes without a sample event in events/: {missing}"
