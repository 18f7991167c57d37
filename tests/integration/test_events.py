"""Every sample event in ``events/`` reaches its handler's success path against the seeded
demo project, answering its exact status and a body that shows it did what it names, and
every HTTP route (of the template and of the OpenAPI document), queue event source,
schedule and function in ``template.yaml`` has one. A file's name says its function: the
part before the first ``-`` is the function's ``CodeUri`` directory. Three kinds of event,
told apart by their shape: the HTTP API's (payload v2), the SQS event Lambda's event source
sends (``Records``), and a schedule's ``Input`` as EventBridge Scheduler sends it."""

from __future__ import annotations

from collections.abc import Callable
import hashlib
import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest

from local import embedded, runtime, template
from local.seed import DEMO_MEMORY_VALUE, DEMO_USER, DemoIds, demo_ids, seed_demo
from recall.domain.jobs import job_of
from recall.wiring import stream_links
from tests.integration.test_chat_over_websocket import RecordingLinks

EVENTS = template.ROOT / "events"
EVENT_FILES = sorted(EVENTS.glob("*.json"))


def load(event_file: Path) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(event_file.read_text())
    return event


def kind_of(event: dict[str, Any]) -> str:
    """``http``, ``sqs``, ``authorizer`` (the WebSocket $connect's), ``websocket`` (a
    WebSocket route's), ``hand-off`` (a streamed turn handed to its worker) or
    ``schedule``, by the event's shape."""
    if event.get("version") == "2.0" and "routeKey" in event:
        return "http"
    if "Records" in event:
        return "sqs"
    if event.get("type") == "REQUEST" and "methodArn" in event:
        return "authorizer"
    if "eventType" in event.get("requestContext", {}):
        return "websocket"
    if "connectionId" in event and "frame" in event:
        return "hand-off"
    return "schedule"


def of_kind(kind: str) -> list[Path]:
    return [path for path in EVENT_FILES if kind_of(load(path)) == kind]


HTTP_FILES, SQS_FILES, SCHEDULE_FILES = of_kind("http"), of_kind("sqs"), of_kind("schedule")

# The status each HTTP event answers over the seeded demo project. Creates are 201 and deletes
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
    "data-export.json": 200,
    "data-import-progress.json": 200,
    "data-import.json": 202,
    "memories-delete.json": 204,
    "memories-history.json": 200,
    "memories-list.json": 200,
    "memories-put.json": 200,
    "projects-create.json": 201,
    "projects-delete.json": 204,
    "projects-erase-me.json": 204,
    "projects-get.json": 200,
    "projects-list-members.json": 200,
    "projects-list.json": 200,
    "projects-openapi.json": 200,
    "projects-presets-create.json": 201,
    "projects-presets-delete.json": 204,
    "projects-presets-get.json": 200,
    "projects-presets-list.json": 200,
    "projects-presets-update.json": 200,
    "projects-remove-member.json": 204,
    "projects-set-member.json": 200,
    "projects-set-budget.json": 200,
    "projects-usage.json": 200,
    "projects-sessions.json": 200,
    "projects-update.json": 200,
}


def sent(event_file: str) -> Any:
    """The JSON body the event sends."""
    return json.loads(load(EVENTS / event_file)["body"])


def answer_to(event_file: str) -> tuple[int, Any]:
    """What another event answers now: its status and its decoded body."""
    response = invoke(EVENTS / event_file)
    return response["statusCode"], json.loads(response.get("body") or "null")


# What each HTTP event's answer shows it did, given the body it answered (None for a 204,
# whose effect is read back through another event). Facts hold whichever events ran before.
EXPECTED_FACT: dict[str, Callable[[Any], bool]] = {
    "chat-clear-context.json": lambda body: (
        body["conversationId"] == demo_ids().conversation_id and bool(body["clearedAfter"])
    ),
    "chat-context.json": lambda body: (
        f"{demo_ids().memory_key}:" in body["memoryBlock"]
        and "currency: EUR" in body["projectContext"]
        and set(body["tools"]) == {"save_preference", "forget_preference"}
    ),
    "chat-turn.json": lambda body: (
        body["conversation"]["created"] is True
        and body["message"]["role"] == "assistant"
        and body["message"]["status"] == "complete"
        and [saved["value"] for saved in body["memoriesSaved"]]
        == [sent("chat-turn.json")["message"]]
    ),
    "conversations-create.json": lambda body: (
        body["title"] == sent("conversations-create.json")["title"] and body["messageCount"] == 0
    ),
    "conversations-delete.json": lambda _: answer_to("conversations-get.json")[0] == 404,
    "conversations-get.json": lambda body: body["conversation"]["id"] == demo_ids().conversation_id,
    "conversations-list.json": lambda body: (
        demo_ids().conversation_id in [thread["id"] for thread in body["conversations"]]
    ),
    "conversations-update.json": lambda body: (
        (body["id"], body["title"])
        == (demo_ids().conversation_id, sent("conversations-update.json")["title"])
        and body["settings"]["temperature"] == 0.3
        and body["settings"]["useSummary"] is False
    ),
    "data-export.json": lambda body: (
        (body["format"], body["userId"]) == ("recall.export", DEMO_USER)
        and demo_ids().conversation_id in [thread["id"] for thread in body["conversations"]]
        and demo_ids().memory_key in [entry["key"] for entry in body["memories"]]
        and body["project"]["name"] == "Corner Shop"
    ),
    "data-import-progress.json": lambda body: (
        (body["id"], body["status"]) == (demo_ids().import_id, "done")
    ),
    "data-import.json": lambda body: (
        body["threadsTotal"] == len(sent("data-import.json")["threads"])
        and body["status"] in {"queued", "running", "done"}
    ),
    "memories-delete.json": lambda _: (
        demo_ids().memory_key
        not in [entry["key"] for entry in answer_to("memories-list.json")[1]["memories"]]
    ),
    "memories-history.json": lambda body: (
        body["key"] == demo_ids().memory_key
        and (body["history"][0]["action"], body["history"][0]["newValue"])
        == ("created", DEMO_MEMORY_VALUE)
    ),
    "memories-list.json": lambda body: (
        demo_ids().memory_key in [entry["key"] for entry in body["memories"]]
    ),
    "memories-put.json": lambda body: (
        (body["key"], body["value"], body["source"])
        == (demo_ids().memory_key, sent("memories-put.json")["value"], "explicit")
    ),
    "projects-create.json": lambda body: (
        (body["name"], body["context"], body["role"])
        == (sent("projects-create.json")["name"], sent("projects-create.json")["context"], "owner")
        and body["id"] != demo_ids().project_id
    ),
    "projects-delete.json": lambda _: answer_to("projects-get.json")[0] == 403,
    "projects-erase-me.json": lambda _: (
        answer_to("projects-get.json")[0] == 403 and answer_to("conversations-get.json")[0] == 403
    ),
    "projects-get.json": lambda body: (
        (body["id"], body["role"]) == (demo_ids().project_id, "owner")
    ),
    "projects-list-members.json": lambda body: (
        (DEMO_USER, "owner") in [(member["userId"], member["role"]) for member in body["members"]]
        and demo_ids().member_id in [member["userId"] for member in body["members"]]
    ),
    "projects-list.json": lambda body: (
        (demo_ids().project_id, "owner") in [(row["id"], row["role"]) for row in body["projects"]]
    ),
    "projects-openapi.json": lambda body: (
        body["openapi"].startswith("3.") and "/projects/{projectId}/chat" in body["paths"]
    ),
    "projects-presets-create.json": lambda body: (
        body["name"] == sent("projects-presets-create.json")["name"]
        and body["contextPrompts"] == sent("projects-presets-create.json")["contextPrompts"]
        and body["settings"]["useSummary"] is False
        and body["id"] != demo_ids().preset_id
    ),
    "projects-presets-delete.json": lambda _: answer_to("projects-presets-get.json")[0] == 404,
    "projects-presets-get.json": lambda body: body["id"] == demo_ids().preset_id,
    "projects-presets-list.json": lambda body: (
        demo_ids().preset_id in [preset["id"] for preset in body["presets"]]
    ),
    "projects-presets-update.json": lambda body: (
        (body["id"], body["settings"]["temperature"], body["settings"]["sendMemory"])
        == (demo_ids().preset_id, 0.5, False)
    ),
    "projects-remove-member.json": lambda _: (
        demo_ids().member_id
        not in [
            member["userId"] for member in answer_to("projects-list-members.json")[1]["members"]
        ]
    ),
    "projects-set-member.json": lambda body: (
        (body["userId"], body["role"])
        == (demo_ids().member_id, sent("projects-set-member.json")["role"])
    ),
    "projects-set-budget.json": lambda body: (
        (body["userId"], body["budget"])
        == (
            demo_ids().member_id,
            {
                "tokensPerDay": None,
                "tokensPerMonth": 2_000_000,
                "turnsPerDay": 200,
                "turnsPerMonth": None,
            },
        )
    ),
    "projects-usage.json": lambda body: (
        body["period"] == "month"
        and body["userId"] == DEMO_USER
        and DEMO_USER in [member["userId"] for member in body["members"]]
        and set(body["upkeep"]["jobs"]) == {"extraction", "summary", "consolidation"}
    ),
    "projects-sessions.json": lambda body: (
        isinstance(body["sessions"], list)
        and all(session["startedAt"] for session in body["sessions"])
    ),
    "projects-update.json": lambda body: (
        (body["id"], body["context"])
        == (demo_ids().project_id, sent("projects-update.json")["context"])
        and body["settings"]["windowMessages"] == 30
    ),
}


def function_of(event_file: Path) -> str:
    directory = event_file.name.split("-", 1)[0]
    by_directory = {path.name: name for name, path in template.code_dirs().items()}
    assert directory in by_directory, (
        f"{event_file.name}: no function has CodeUri functions/{directory}"
    )
    return by_directory[directory]


@pytest.fixture(autouse=True)
def demo(embedded_store: embedded.EmbeddedStore) -> DemoIds:
    """What the events name, there before each event: a delete event removes its thread,
    memory entry or member, and the next event needs them back."""
    return seed_demo()


def invoke(event_file: Path) -> Any:
    return runtime.invoke(function_of(event_file), load(event_file))


def test_events_cover_every_function_in_the_template() -> None:
    # Given
    named = {function_of(path) for path in EVENT_FILES}
    # When
    missing = sorted(set(template.code_dirs()) - named)
    # Then
    assert EVENT_FILES, f"no event files in {EVENTS}"
    assert not missing, f"functions without a sample event in events/: {missing}"


def test_every_http_event_file_has_its_expected_status_and_fact() -> None:
    # Given
    files = {path.name for path in HTTP_FILES}
    # When
    unlisted = sorted(files - set(EXPECTED_STATUS))
    stale = sorted(set(EXPECTED_STATUS) - files)
    unfactual = sorted(files - set(EXPECTED_FACT))
    stale_facts = sorted(set(EXPECTED_FACT) - files)
    # Then
    assert not unlisted, f"say which status these events answer in EXPECTED_STATUS: {unlisted}"
    assert not stale, f"EXPECTED_STATUS names event files that are gone: {stale}"
    assert not unfactual, f"say what these events' answers show in EXPECTED_FACT: {unfactual}"
    assert not stale_facts, f"EXPECTED_FACT names event files that are gone: {stale_facts}"


@pytest.mark.parametrize("event_file", EVENT_FILES, ids=lambda path: path.name)
def test_event_file_reaches_its_success_path(event_file: Path) -> None:
    # Given
    function = function_of(event_file)
    assert (template.code_dirs()[function] / "app.py").is_file(), (
        f"{event_file.name} targets {function}, which has no app.py"
    )
    event = load(event_file)
    if kind_of(event) == "authorizer":
        # Its token is a placeholder: no issuer signs it here. Signed by a test key, the same
        # event is allowed in tests/unit/test_websocket_authorizer.py.
        with pytest.raises(Exception, match=r"^Unauthorized$"):
            invoke(event_file)
        return
    links = RecordingLinks()
    stream_links().use(links)
    # When
    try:
        response = invoke(event_file)
    finally:
        stream_links().use(None)
    # Then
    if kind_of(event) == "websocket":  # a route answers 200; a chat frame streams a turn
        assert response["statusCode"] == 200, response
        frames = [frame for posted in links.frames.values() for frame in posted]
        if event["requestContext"]["routeKey"] == "$connect":
            assert response["headers"] == {"Sec-WebSocket-Protocol": "bearer"}, response
        else:
            assert (frames[0]["type"], frames[-1]["type"]) == ("start", "done"), frames
    elif kind_of(event) == "hand-off":  # the turn streamed to its end, the client there
        assert response == {"clientLeft": False}, response
        (frames,) = links.frames.values()
        assert frames[-1]["status"] == 200, frames
    elif kind_of(event) == "sqs":  # every record done: nothing for the queue to retry
        assert isinstance(response, dict), response
        assert response.get("batchItemFailures") in (None, []), response
    elif kind_of(event) == "schedule":  # the maintenance report names the job it ran
        assert isinstance(response, dict), response
        assert response["job"] == event["job"], response
        assert {"read", "changed"} <= set(response), response
    else:
        assert response["statusCode"] == EXPECTED_STATUS[event_file.name], response
        body = None
        if response["statusCode"] == 204:
            assert not response.get("body"), response
        else:
            body = json.loads(response["body"])
            assert isinstance(body, dict), body
            assert "error" not in body, body
        assert EXPECTED_FACT[event_file.name](body), body


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


@pytest.mark.parametrize(
    "event_file",
    [
        EVENTS / "projects-remove-member.json",
        *SQS_FILES[:1],
        *[path for path in SCHEDULE_FILES if path.name == "maintenance-expire-memories.json"],
    ],
    ids=lambda path: path.name,
)
def test_make_invoke_prints_only_the_response_on_stdout(event_file: Path) -> None:
    """``make invoke`` output is meant to be piped, so logs must stay on stderr. It runs
    with a shell's environment: none of the AWS or Powertools variables this test session
    set (its WARNING log level would hide the INFO lines that must not reach stdout)."""
    # Given
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
    response = json.loads(run.stdout)
    if event_file in SQS_FILES:
        assert response.get("batchItemFailures") in (None, []), run.stdout
    elif event_file in SCHEDULE_FILES:
        assert response["job"] == load(event_file)["job"], run.stdout
    else:
        assert response["statusCode"] == EXPECTED_STATUS[event_file.name], run.stdout


@pytest.mark.parametrize("event_file", HTTP_FILES, ids=lambda path: path.name)
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
    covered = {load(path)["routeKey"] for path in HTTP_FILES}
    # When
    missing = sorted(
        f"{route.route_key} ({route.function})"
        for route in template.routes()
        if route.route_key not in covered
    )
    # Then
    assert not missing, f"routes without a sample event in events/: {missing}"


def test_every_operation_of_the_openapi_document_has_an_event_file() -> None:
    # Given
    covered = {load(path)["routeKey"] for path in HTTP_FILES}
    document = json.loads((template.ROOT / "layers/recall/recall/api/openapi.json").read_text())
    operations = {
        f"{method.upper()} {path}"
        for path, methods in document["paths"].items()
        for method in methods
    }
    # When
    missing = sorted(operations - covered)
    # Then
    assert operations, "the OpenAPI document lists no operation"
    assert not missing, f"OpenAPI operations without a sample event in events/: {missing}"


@pytest.mark.parametrize("event_file", SQS_FILES, ids=lambda path: path.name)
def test_sqs_event_file_is_what_lambda_sends_from_the_functions_queue(event_file: Path) -> None:
    # Given
    sources = {source.function: source for source in template.queue_sources()}
    function = function_of(event_file)
    # When
    records = load(event_file)["Records"]
    # Then: shaped like `sam local generate-event sqs receive-message`, from the queue the
    # function's SQS event names (locally named after its logical id)
    assert function in sources, f"{event_file.name}: {function} has no SQS event in the template"
    assert 1 <= len(records) <= sources[function].batch_size
    ids = demo_ids()
    for record in records:
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"].split(":")[-1] == sources[function].queue
        assert record["messageId"] and record["receiptHandle"]
        assert int(record["attributes"]["ApproximateReceiveCount"]) >= 1
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()  # noqa: S324
        job = job_of(record["body"])  # a job the worker reads, for the seeded demo thread
        assert (job.user_id, job.project_id) == (DEMO_USER, ids.project_id)
        assert getattr(job, "conversation_id", ids.conversation_id) == ids.conversation_id


@pytest.mark.parametrize("event_file", SCHEDULE_FILES, ids=lambda path: path.name)
def test_schedule_event_file_is_a_schedules_input_in_the_template(event_file: Path) -> None:
    # Given
    function = function_of(event_file)
    inputs = [schedule.input for schedule in template.schedules() if schedule.function == function]
    # When
    event = load(event_file)
    # Then: exactly what EventBridge Scheduler sends, in a file named after its job
    assert event in inputs, f"{event_file.name} is none of {function}'s schedule inputs {inputs}"
    assert event_file.name == f"{event_file.name.split('-', 1)[0]}-{event['job']}.json"


def test_every_schedule_and_queue_event_source_has_an_event_file() -> None:
    # Given
    schedule_events = [(function_of(path), load(path)) for path in SCHEDULE_FILES]
    queue_functions = {function_of(path) for path in SQS_FILES}
    # When
    missing = [
        f"{schedule.function} {schedule.event} {schedule.input}"
        for schedule in template.schedules()
        if (schedule.function, schedule.input) not in schedule_events
    ] + [
        f"{source.function} SQS {source.queue}"
        for source in template.queue_sources()
        if source.function not in queue_functions
    ]
    # Then
    assert template.schedules() and template.queue_sources()
    assert not missing, f"event sources without a sample event in events/: {missing}"
