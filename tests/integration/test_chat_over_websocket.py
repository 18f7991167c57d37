"""Chat turns over the WebSocket API, through the real WebSocket functions with the
events API Gateway sends, over the embedded DynamoDB: the ``chat`` route hands the turn
off (run here at once) and the streaming worker posts its frames to a recording
connection. ``done`` carries exactly what ``POST /chat`` answers, ``error`` exactly its
error body, and a turn is saved once, whether or not its client stayed. No frame a client
sends is answered with a 5xx (bounded fuzzing, as the HTTP routes have)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import json
import time
from typing import Any

import boto3
from botocore.stub import Stubber
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
import pytest

from local import runtime, template
from local.websocket import function_of, route_of, websocket_event
from recall.api.connections import AwsLinks
from recall.api.stream import Connection, ConnectionGone, Frame
from recall.domain.prompt import ModelReply, ModelRequest, ModelThrottled
from recall.settings import get_settings
from recall.wiring import model_choice, stream_links
from tests.integration.any_json import any_json
from tests.integration.conftest import Api

MakeProject = Callable[..., str]


class RecordingLinks:
    """The management API and the hand-off, in-process: frames kept per connection; a
    connection told to leave after ``n`` frames answers Gone from then on."""

    def __init__(self) -> None:
        self.frames: dict[str, list[Frame]] = {}
        self.closed: list[str] = []
        self.leave_after: dict[str, int] = {}
        self.handed_off: list[dict[str, Any]] = []
        self.worker_answers: list[Any] = []

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        links = self

        class Recorded:
            def post(self, frame: Frame) -> None:
                kept = links.frames.setdefault(connection_id, [])
                if len(kept) >= links.leave_after.get(connection_id, 10_000):
                    raise ConnectionGone(connection_id)
                kept.append(json.loads(json.dumps(frame)))

            def close(self) -> None:
                links.closed.append(connection_id)

        return Recorded()

    def hand_off(self, payload: dict[str, Any]) -> None:
        self.handed_off.append(payload)
        self.worker_answers.append(runtime.invoke(function_of("ws_stream"), payload))


@pytest.fixture
def links() -> Iterator[RecordingLinks]:
    recording = RecordingLinks()
    stream_links().use(recording)
    yield recording
    stream_links().use(None)


class Socket:
    """One client connection of ``api``'s user."""

    count = 0

    def __init__(self, api: Api, links: RecordingLinks) -> None:
        Socket.count += 1
        self.id = f"conn-{Socket.count}"
        self.api = api
        self.links = links

    def send(self, frame: Any) -> list[Frame]:
        """Send one frame; the frames the server posted for it."""
        before = len(self.links.frames.get(self.id, []))
        body = frame if isinstance(frame, str) else json.dumps(frame)
        route = "chat" if isinstance(frame, dict) and frame.get("action") == "chat" else "$default"
        event = websocket_event(route, "MESSAGE", self.id, str(self.api.sub), "ws.test", body=body)
        assert runtime.invoke(function_of("ws_chat"), event) == {"statusCode": 200}
        return self.links.frames.get(self.id, [])[before:]

    def chat(self, project: str, message: str, **extra: Any) -> list[Frame]:
        body: dict[str, Any] = {"message": message}
        if "conversationId" in extra:
            body["conversationId"] = extra.pop("conversationId")
        return self.send({"action": "chat", "projectId": project, "body": body, **extra})


@pytest.fixture
def socket_of(links: RecordingLinks) -> Callable[[Api], Socket]:
    return lambda api: Socket(api, links)


def text_of(frames: list[Frame]) -> str:
    return "".join(frame["text"] for frame in frames if frame["type"] == "delta")


def test_an_editor_streams_a_turn_and_done_carries_the_reply(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    # Given
    project = make_project(alice)
    socket = socket_of(alice)
    # When
    frames = socket.chat(project, "What colour should the header be?", requestId="r-1")
    # Then: start, deltas, done, each with the request's id
    assert frames[0]["type"] == "start"
    assert frames[-1]["type"] == "done"
    assert {frame["type"] for frame in frames[1:-1]} == {"delta"}
    assert {frame["requestId"] for frame in frames} == {"r-1"}
    done = frames[-1]
    assert done["status"] == 200
    assert frames[0]["conversation"] == done["body"]["conversation"]
    assert done["body"]["conversation"]["created"] is True
    assert text_of(frames) == done["body"]["message"]["content"]
    thread = done["body"]["conversation"]["id"]
    saved = alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    assert [message["id"] for message in saved][-1] == done["body"]["message"]["id"]


def test_latest_continues_the_thread_and_another_project_stays_apart(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    # Given a thread in each of two projects
    first, second = make_project(alice), make_project(alice)
    socket = socket_of(alice)
    thread = socket.chat(first, "hello there")[-1]["body"]["conversation"]["id"]
    other = socket.chat(second, "hello elsewhere")[-1]["body"]["conversation"]["id"]
    # When
    frames = socket.chat(first, "and again", conversationId="latest")
    # Then
    assert frames[0]["conversation"]["id"] == thread != other
    assert frames[-1]["body"]["conversation"]["created"] is False
    assert len(alice.get(f"/projects/{first}/conversations/{thread}").body["messages"]) == 4
    assert len(alice.get(f"/projects/{second}/conversations/{other}").body["messages"]) == 2


def test_done_is_exactly_the_http_reply_and_a_retried_frame_replays_it_without_a_second_turn(
    alice: Api,
    make_project: MakeProject,
    socket_of: Callable[[Api], Socket],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given each function named as Lambda names it (not one name for all, as locally)
    invoke = runtime.invoke

    def as_in_lambda(function: str, event: dict[str, Any]) -> Any:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", f"recall-{function}-1A2B3C")
        return invoke(function, event)

    monkeypatch.setattr(runtime, "invoke", as_in_lambda)
    # And a streamed turn with an idempotency key
    project = make_project(alice)
    socket = socket_of(alice)
    first = socket.chat(project, "Never use stock photos.", idempotencyKey="k-1")
    done = first[-1]
    thread = done["body"]["conversation"]["id"]
    # When the frame is sent again, and the same request over HTTP with the same key
    again = socket.chat(project, "Never use stock photos.", idempotencyKey="k-1")
    http = alice.post(
        f"/projects/{project}/chat",
        {"message": "Never use stock photos."},
        headers={"Idempotency-Key": "k-1"},
    )
    # Then both answer the recorded reply, and the turn was saved once
    assert again == [done]
    assert http.status == 200
    assert http.body == done["body"]
    assert len(alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]) == 3


def test_a_memory_tool_call_is_a_tool_frame_and_the_text_after_it_is_the_reply(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    # Given
    project = make_project(alice)
    # When
    frames = socket_of(alice).chat(project, "Always keep the header dark.")
    # Then
    (tool,) = [frame for frame in frames if frame["type"] == "tool"]
    assert tool["tool"] == "save_preference"
    assert tool["outcome"] == "saved"
    done = frames[-1]
    assert [entry["key"] for entry in done["body"]["memoriesSaved"]] == [tool["key"]]
    after_tool = frames[frames.index(tool) + 1 : -1]
    assert text_of(after_tool) == done["body"]["message"]["content"]


@pytest.mark.parametrize("role", ["viewer", None])
def test_a_viewer_or_a_stranger_gets_the_http_403_as_an_error_frame(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    socket_of: Callable[[Api], Socket],
    role: str | None,
) -> None:
    # Given
    project = make_project(alice, {bob: role} if role else None)
    # When
    frames = socket_of(bob).chat(project, "let me in", requestId="r-2")
    http = bob.post(f"/projects/{project}/chat", {"message": "let me in"})
    # Then
    assert frames == [{"type": "error", "requestId": "r-2", "status": 403, "body": http.body}]
    assert http.status == 403


def test_an_overlong_message_is_the_http_413_as_an_error_frame(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    # Given
    project = make_project(alice)
    message = "x" * 16_001
    # When
    frames = socket_of(alice).chat(project, message)
    http = alice.post(f"/projects/{project}/chat", {"message": message})
    # Then
    assert http.status == 413
    assert frames == [{"type": "error", "requestId": None, "status": 413, "body": http.body}]


def test_a_blank_message_and_an_unknown_action_are_client_errors(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    project = make_project(alice)
    socket = socket_of(alice)
    blank = socket.chat(project, "   ")
    unknown = socket.send({"action": "dance", "projectId": project, "body": {"message": "hi"}})
    assert [frame["status"] for frame in blank + unknown] == [422, 422]


class Throttled:
    def converse(self, request: ModelRequest) -> ModelReply:
        raise ModelThrottled("slow down")


def test_a_failed_model_is_the_http_error_with_retry_after_and_the_turn_is_saved(
    alice: Api, make_project: MakeProject, socket_of: Callable[[Api], Socket]
) -> None:
    # Given
    project = make_project(alice)
    model_choice().use(Throttled())
    try:
        # When
        frames = socket_of(alice).chat(project, "are you there?")
    finally:
        model_choice().use(None)
    # Then
    error = frames[-1]
    assert (error["type"], error["status"], error["retryAfter"]) == ("error", 503, 2)
    assert error["body"]["error"]["code"] == "model_throttled"
    [ids] = error["body"]["error"]["details"]
    thread = f"/projects/{project}/conversations/{ids['conversationId']}"
    saved = alice.get(thread).body["messages"]
    assert [message["id"] for message in saved] == [ids["userMessageId"], ids["assistantMessageId"]]


class Talkative:
    """A model whose long reply streams in many small chunks, so batches go out mid-reply."""

    TEXT = " ".join(f"word{n}" for n in range(300))

    def converse(self, request: ModelRequest) -> ModelReply:
        return ModelReply(text=self.TEXT)

    def converse_stream(self, request: ModelRequest, on_text: Callable[[str], None]) -> ModelReply:
        for start in range(0, len(self.TEXT), 10):
            on_text(self.TEXT[start : start + 10])
        return self.converse(request)


def test_a_client_that_leaves_mid_reply_still_has_its_turn_saved_once(
    alice: Api,
    make_project: MakeProject,
    socket_of: Callable[[Api], Socket],
    links: RecordingLinks,
) -> None:
    # Given a client that leaves after the start frame and two deltas, mid-reply
    project = make_project(alice)
    socket = socket_of(alice)
    links.leave_after[socket.id] = 3
    model_choice().use(Talkative())
    try:
        # When
        frames = socket.chat(project, "Tell me everything about the project, at length.")
    finally:
        model_choice().use(None)
    # Then the client saw the beginning only, the worker knew it left, and the thread
    # shows the whole turn, saved once
    assert [frame["type"] for frame in frames] == ["start", "delta", "delta"]
    assert links.worker_answers == [{"clientLeft": True}]
    thread = frames[0]["conversation"]["id"]
    saved = alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    assert [message["role"] for message in saved] == ["user", "assistant"]
    assert saved[-1]["status"] == "complete"
    assert saved[-1]["content"] == Talkative.TEXT
    assert Talkative.TEXT.startswith(text_of(frames))


class ManagementApi:
    """API Gateway's management API as AwsLinks calls it, keeping what was posted."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.closed: list[str] = []

    def post_to_connection(self, ConnectionId: str, Data: bytes) -> None:
        self.frames.append(json.loads(Data))

    def delete_connection(self, ConnectionId: str) -> None:
        self.closed.append(ConnectionId)


class AcceptingLambda:
    """Lambda as AwsLinks calls it, accepting every hand-off and keeping its payload."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> None:
        self.payloads.append(json.loads(Payload))


def test_a_frame_after_the_connections_token_expired_is_a_401_and_closes_the_connection(
    alice: Api, make_project: MakeProject
) -> None:
    # Given the deployed links, and a project alice may chat in
    project = make_project(alice)
    management, functions = ManagementApi(), AcceptingLambda()
    stream_links().use(AwsLinks("ws-stream", lambda_client=functions, management_client=management))
    frame = {"action": "chat", "requestId": "r-9", "projectId": project, "body": {"message": "hi"}}
    body = json.dumps(frame)
    now = int(time.time())

    def send(connection: str, exp: str) -> None:
        event = websocket_event(
            "chat", "MESSAGE", connection, str(alice.sub), "ws.test", body=body, exp=exp
        )
        assert runtime.invoke(function_of("ws_chat"), event) == {"statusCode": 200}

    try:
        # When a frame comes on a connection whose token is good for another minute, and
        # one on a connection whose token expired a second ago
        send("conn-live", str(now + 60))
        send("conn-expired", str(now - 1))
    finally:
        stream_links().use(None)
    # Then the first turn is handed off, as alice
    [handed] = functions.payloads
    assert (handed["connectionId"], handed["user"]) == ("conn-live", alice.sub)
    # And the second is refused, for its request, with the HTTP API's 401 body, and its
    # connection closed
    [refused] = management.frames
    assert (refused["type"], refused["requestId"], refused["status"]) == ("error", "r-9", 401)
    assert refused["body"]["error"]["code"] == "unauthenticated"
    assert management.closed == ["conn-expired"]


# Lambda refusing the asynchronous hand-off: the function's or the account's concurrency
# used up, or a fault of Lambda's own.
HAND_OFF_REFUSED = [
    ("TooManyRequestsException", 429, 429, "throttled"),
    ("ServiceException", 500, 503, "unavailable"),
]


@pytest.mark.parametrize(
    ("code", "http", "status", "error"), HAND_OFF_REFUSED, ids=lambda value: str(value)
)
def test_a_hand_off_lambda_refuses_is_an_error_frame_to_retry_with_the_frames_request_id(
    alice: Api, make_project: MakeProject, code: str, http: int, status: int, error: str
) -> None:
    # Given the deployed links, whose Lambda refuses the stream worker's invoke
    project = make_project(alice)
    client = boto3.client("lambda", region_name="us-east-1")
    refusing = Stubber(client)
    refusing.add_client_error("invoke", code, "refused", http_status_code=http)
    management = ManagementApi()
    stream_links().use(AwsLinks("ws-stream", lambda_client=client, management_client=management))
    frame = {"action": "chat", "requestId": "r-7", "projectId": project, "body": {"message": "hi"}}
    body = json.dumps(frame)
    event = websocket_event("chat", "MESSAGE", "conn-aws", str(alice.sub), "ws.test", body=body)
    try:
        # When
        with refusing:
            assert runtime.invoke(function_of("ws_chat"), event) == {"statusCode": 200}
    finally:
        stream_links().use(None)
    # Then one error frame, for that request, that says when to send it again
    [sent] = management.frames
    assert (sent["type"], sent["requestId"], sent["status"]) == ("error", "r-7", status), sent
    assert sent["body"]["error"]["code"] == error
    assert sent["retryAfter"] == get_settings().retry_after_seconds


def test_a_frame_on_a_connection_without_identity_is_a_401(
    links: RecordingLinks,
) -> None:
    event = websocket_event("chat", "MESSAGE", "conn-anon", "", "ws.test", body="{}")
    event["requestContext"]["authorizer"] = {}
    runtime.invoke(function_of("ws_chat"), event)
    (frame,) = links.frames["conn-anon"]
    assert (frame["status"], frame["body"]["error"]["code"]) == (401, "unauthenticated")
    assert links.handed_off == []
    assert links.closed == ["conn-anon"]


def test_connect_selects_the_bearer_subprotocol_when_offered() -> None:
    chat = function_of("ws_chat")
    offered = websocket_event(
        "$connect", "CONNECT", "c", "u", "ws.test", headers={"Sec-WebSocket-Protocol": "bearer, t"}
    )
    plain = websocket_event("$connect", "CONNECT", "c", "u", "ws.test", headers={})
    assert runtime.invoke(chat, offered)["headers"] == {"Sec-WebSocket-Protocol": "bearer"}
    assert "headers" not in runtime.invoke(chat, plain)


def test_make_dev_serves_the_websocket_routes_the_template_declares() -> None:
    # Given the template's WebSocket routes and the integration they target
    routes = template.resources("AWS::ApiGatewayV2::Route")
    (integration_name, integration) = next(
        iter(template.resources("AWS::ApiGatewayV2::Integration").items())
    )
    # Then: the four routes local/websocket.py builds events for, all to that integration,
    # which calls the function make dev invokes; $connect alone behind the authorizer
    keys = {route["Properties"]["RouteKey"]: route["Properties"] for route in routes.values()}
    assert set(keys) == {"$connect", "$disconnect", "chat", "$default"}
    for properties in keys.values():
        assert properties["Target"] == {"Fn::Sub": f"integrations/${{{integration_name}}}"}
    assert integration["Properties"]["IntegrationUri"]["Fn::Sub"].count(
        "${" + function_of("ws_chat") + ".Arn}"
    )
    assert keys["$connect"]["AuthorizationType"] == "CUSTOM"
    assert all("AuthorizationType" not in keys[key] for key in ("$disconnect", "chat", "$default"))
    api = next(iter(template.resources("AWS::ApiGatewayV2::Api").values()))
    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"
    assert route_of('{"action": "chat"}') == "chat"
    assert route_of('{"action": "dance"}') == route_of("not json") == "$default"


# Any code point, lone surrogates too (JSON can escape them; UTF-8 cannot hold them).
TEXT = st.text(st.characters(blacklist_categories=()), max_size=40)
# Ids longer than a DynamoDB key may be.
LONG = st.text(st.sampled_from("abc123"), min_size=2100, max_size=2200)
JSON = any_json(TEXT)
CHAT_BODIES = st.fixed_dictionaries(
    {},
    optional={
        "message": TEXT | JSON,
        "conversationId": TEXT | LONG | JSON,
        "latest": JSON,
        "model": TEXT | LONG | JSON,
        "presetId": TEXT | LONG | JSON,
    },
)


# Where a strategy names the test's project, replaced by its id when the frame is sent.
PROJECT = "the-project"
# Text with lone surrogates, which UTF-8 cannot hold.
SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
CHAT_FRAMES = st.fixed_dictionaries(
    {"action": st.sampled_from(["chat", "Chat", "", "dance"]) | JSON},
    optional={
        "projectId": st.just(PROJECT) | TEXT | LONG | JSON,
        "body": CHAT_BODIES | JSON,
        "requestId": TEXT | JSON,
        "idempotencyKey": TEXT | LONG | JSON,
    },
)
# A frame right but for one field, so the turn gets as far as that field takes it.
NEAR_FRAMES = st.fixed_dictionaries(
    {
        "action": st.just("chat"),
        "projectId": st.just(PROJECT) | LONG,
        "body": st.fixed_dictionaries(
            {"message": TEXT | SURROGATES}, optional={"model": TEXT | LONG}
        ),
    }
)
# Anything a client may send: text that is not JSON, any JSON, chat frames with any field
# wrong (or right: then the turn runs).
FRAMES = TEXT | JSON | CHAT_FRAMES | NEAR_FRAMES


def placed(value: Any, project: str) -> Any:
    if value == PROJECT:
        return project
    if isinstance(value, dict):
        return {key: placed(inner, project) for key, inner in value.items()}
    return value


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(frame=FRAMES)
@example(frame={"action": "chat", "projectId": "a" * 2100, "body": {"message": "hi"}})
@example(frame={"action": "chat", "projectId": PROJECT, "body": {"message": "hi \ud800"}})
def test_no_frame_a_client_sends_is_answered_with_a_5xx(
    frame: Any,
    alice: Api,
    make_project: MakeProject,
    socket_of: Callable[[Api], Socket],
    seeded_projects: dict[str, str],
) -> None:
    # Given a project of the caller's (the offline model never fails, so a 5xx is a bug)
    if str(alice.sub) not in seeded_projects:
        seeded_projects[str(alice.sub)] = make_project(alice)
    project = seeded_projects[str(alice.sub)]
    socket = socket_of(alice)
    # When they send anything at all
    sent = placed(frame, project)
    posted = socket.send(sent)
    # Then every error is a client error, in the HTTP error body's shape
    for answer in posted:
        if answer["type"] == "error":
            assert 400 <= answer["status"] < 500, (sent, answer)
            assert set(answer["body"]["error"]) >= {"code", "message"}, (sent, answer)


@pytest.fixture(scope="module")
def seeded_projects() -> dict[str, str]:
    return {}


def test_a_handed_off_turn_is_never_run_again_nor_run_after_its_client_left() -> None:
    # Given the stream worker's asynchronous invocation settings
    worker = template.resources("AWS::Serverless::Function")["WsStreamFunction"]
    invoke = worker["Properties"]["EventInvokeConfig"]
    # Then a failed turn is not run twice, and a throttled hand-off is dropped after a minute
    assert invoke["MaximumRetryAttempts"] == 0
    assert invoke["MaximumEventAgeInSeconds"] == 60
