"""Every sample event in ``events/`` runs against the real handler, and every HTTP route in
``template.yaml`` has one. A file's name says its function: the part before the first
``-`` is the function's ``CodeUri`` directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local import embedded, runtime, template
from local.seed import seed_demo

EVENTS = template.ROOT / "events"
EVENT_FILES = sorted(EVENTS.glob("*.json"))
DEMO_USER = "demo-user"


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


def shared_id(name: str) -> str:
    """The one ``projectId`` (or ``conversationId``) every event that has one uses."""
    found = {load(path).get("pathParameters", {}).get(name) for path in EVENT_FILES} - {None}
    assert len(found) == 1, f"events should share one {name}, found {found}"
    return str(found.pop())


@pytest.fixture(autouse=True)
def demo(embedded_store: embedded.EmbeddedStore) -> tuple[str, str]:
    """The project and thread the events name, there before each event (a delete event
    removes the thread)."""
    return seed_demo()


def test_events_folder_has_events() -> None:
    assert EVENT_FILES, f"no event files in {EVENTS}"


@pytest.mark.parametrize("event_file", EVENT_FILES, ids=lambda path: path.name)
def test_event_file_gets_a_well_formed_response(event_file: Path) -> None:
    # Given
    function = function_of(event_file)
    event = load(event_file)
    assert (template.code_dirs()[function] / "app.py").is_file(), (
        f"{event_file.name} targets {function}, which has no app.py"
    )
    # When
    response = runtime.invoke(function, event)
    # Then
    assert isinstance(response, dict), response
    status = response["statusCode"]
    assert isinstance(status, int)
    assert status < 500, response
    if "body" in event:
        assert status not in (400, 422), f"the sample body is not valid: {response}"
    if response.get("body"):
        body = json.loads(response["body"])
        assert isinstance(body, dict), body
        if status >= 400:
            assert set(body) == {"error"}, body
            assert isinstance(body["error"]["code"], str)
            assert isinstance(body["error"]["message"], str)
        else:
            assert "error" not in body, body


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
