"""Each function's IAM policy in ``template.yaml`` grants what its code asks AWS for, and
no more. What the code asks for is observed, not read: every sample event in ``events/``,
chat turns that call the memory tools (one through Bedrock, one through Bedrock on the
JSON reply protocol), and the jobs those turns queue run through the real handlers, while
a botocore ``before-call`` hook records each request (service, operation, table, index or
queue) under the function being invoked.
Each request becomes the IAM actions AWS checks for it (a transaction needs the item-level
action of every item), and each action must be allowed on its resource by the function's
own statements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase
import json
import re
import time
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
import pytest

from local import background, embedded, runtime, template
from local.seed import DEMO_USER, grow_thread, seed_demo
from local.websocket import websocket_event
from recall.api.connections import AwsLinks
from recall.api.stream import Connection
from recall.domain import clock
from recall.domain.prompt import ModelProvider, ModelReply, ModelRequest
from recall.providers.bedrock import BedrockProvider
from recall.providers.json_protocol import JsonProtocolProvider
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.store.exports import s3_client
from recall.store.idempotency import persistence_layer
from recall.store.imports import import_key, progress_sk
from recall.store.jobs import sqs_client
from recall.wiring import (
    conversation_store,
    data_service,
    erasure_service,
    memory_store,
    model_choice,
    stream_links,
)
from tests.integration.test_events import EVENT_FILES, function_of, kind_of, load

REGION, ACCOUNT = "us-east-1", "000000000000"

# The grants no run here reaches, each with the reason it stays. Any other grant that no
# request used fails the test: remove it from the template, or say here why it stays.
_BEDROCK = "arn:aws:bedrock:*::foundation-model/*"
_PROFILES = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/*"
_TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/"
NOT_REACHED_HERE = {
    ("ChatFunction", "bedrock:InvokeModel", _PROFILES): (
        "model ids that name an inference profile (us.…, eu.…) are called through it"
    ),
    ("ChatFunction", "dynamodb:GetItem", f"{_TABLE}IdempotencyTable"): (
        "Powertools reads a record itself only when its conditional put did not return it"
    ),
    ("ChatFunction", "dynamodb:DeleteItem", f"{_TABLE}IdempotencyTable"): (
        "Powertools drops an idempotency record when the turn raises"
    ),
    ("WsStreamFunction", "bedrock:InvokeModelWithResponseStream", _PROFILES): (
        "model ids that name an inference profile (us.…, eu.…) are called through it"
    ),
    ("WsStreamFunction", "bedrock:InvokeModel", _PROFILES): (
        "model ids that name an inference profile (us.…, eu.…) are called through it"
    ),
    ("WsStreamFunction", "dynamodb:GetItem", f"{_TABLE}IdempotencyTable"): (
        "Powertools reads a record itself only when its conditional put did not return it"
    ),
    ("WsStreamFunction", "dynamodb:DeleteItem", f"{_TABLE}IdempotencyTable"): (
        "Powertools drops an idempotency record when the turn raises"
    ),
    ("WorkerFunction", "bedrock:InvokeModel", _BEDROCK): (
        "extraction and summaries call Bedrock only when MODEL_PROVIDER=bedrock"
    ),
    ("WorkerFunction", "bedrock:InvokeModel", _PROFILES): (
        "extraction and summaries call Bedrock only when MODEL_PROVIDER=bedrock"
    ),
    ("WorkerFunction", "dynamodb:DeleteItem", f"{_TABLE}MemoriesTable"): (
        "consolidation deletes entries only past its gates (24 h, 3 sessions, 5 entries)"
    ),
    ("WorkerFunction", "dynamodb:BatchWriteItem", f"{_TABLE}ProjectsTable"): (
        "the worker turns members into erasure markers only when the request that began a"
        " project's deletion failed before it did"
    ),
    ("DataFunction", "s3:DeleteObject", "arn:aws:s3:::exportsbucket/exports/*"): (
        "an export finished after its user's erasure began is deleted, not linked"
    ),
    ("ChatFunction", "dynamodb:PutItem", f"{_TABLE}UsageTable"): (
        "a finished day's counters are put apart by the first turn of a later day"
    ),
    ("ChatFunction", "dynamodb:UpdateItem", f"{_TABLE}SessionsTable"): (
        "a turn ends the member's last session only when it comes SESSION_IDLE_SECONDS (24 h)"
        " after that session's last turn"
    ),
    ("WsStreamFunction", "dynamodb:PutItem", f"{_TABLE}UsageTable"): (
        "a finished day's counters are put apart by the first turn of a later day"
    ),
    ("WsStreamFunction", "dynamodb:UpdateItem", f"{_TABLE}SessionsTable"): (
        "a turn ends the member's last session only when it comes SESSION_IDLE_SECONDS (24 h)"
        " after that session's last turn"
    ),
    ("WorkerFunction", "dynamodb:UpdateItem", f"{_TABLE}UsageTable"): (
        "jobs count model calls only when MODEL_PROVIDER=bedrock (the offline extractor"
        " and summariser call no model)"
    ),
    **{
        ("MaintenanceFunction", action, resource): (
            "prune-sessions reads a session's usage and threads, and ends or moves it, only"
            " once it is due: SESSION_IDLE_SECONDS (24 h) and the grace after its last turn"
        )
        for action, resource in (
            ("dynamodb:UpdateItem", f"{_TABLE}SessionsTable"),
            ("dynamodb:BatchGetItem", f"{_TABLE}UsageTable"),
            ("dynamodb:Query", f"{_TABLE}ConversationsTable/index/byRecency"),
        )
    },
}


@dataclass(frozen=True)
class Request:
    """One IAM authorisation a request needs: an action on a resource ARN."""

    function: str
    action: str
    resource: str


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def model_arn(model_id: str) -> str:
    if model_id.startswith("arn:"):
        return model_id
    if model_id.split(".", 1)[0] in {"us", "eu", "apac", "global"}:
        return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model_id}"
    return f"arn:aws:bedrock:{REGION}::foundation-model/{model_id}"


# --- What the template grants -------------------------------------------------------------


def _arn_of(logical_id: str) -> str:
    kind = template.load()["Resources"][logical_id]["Type"]
    if kind == "AWS::DynamoDB::Table":
        return table_arn(logical_id)
    if kind == "AWS::SQS::Queue":
        return queue_arn(logical_id)
    if kind == "AWS::Serverless::Function":
        return function_arn(logical_id)
    if kind == "AWS::S3::Bucket":
        return f"arn:aws:s3:::{template.bucket_names()[logical_id]}"
    raise AssertionError(f"no ARN form for {logical_id} ({kind})")


# The WebSocket API's id and stage as the sample events name them.
WEBSOCKET_API, WEBSOCKET_STAGE = "abc123", "live"


def function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"


def _ref_of(logical_id: str) -> str:
    """What ``${LogicalId}`` in a ``!Sub`` is here: the WebSocket API's id, its stage."""
    kind = template.load()["Resources"][logical_id]["Type"]
    if kind == "AWS::ApiGatewayV2::Api":
        return WEBSOCKET_API
    if kind == "AWS::ApiGatewayV2::Stage":
        return WEBSOCKET_STAGE
    raise AssertionError(f"no local value for ${{{logical_id}}} ({kind})")


def _resource(value: Any) -> str:
    """A statement's ``Resource`` entry as the ARN pattern it is in this account."""
    if isinstance(value, str):
        return value
    if set(value) == {"Fn::GetAtt"}:
        target = value["Fn::GetAtt"]
        name, attribute = target if isinstance(target, list) else target.split(".", 1)
        assert attribute == "Arn", value
        return _arn_of(name)
    if set(value) == {"Fn::Sub"}:
        text = value["Fn::Sub"]
        assert isinstance(text, str), value
        for name in template.load()["Resources"]:
            text = (
                text.replace("${" + name + ".Arn}", _arn_of(name))
                if f"${{{name}." in text
                else text
            )
        for name in template.load()["Resources"]:
            if "${" + name + "}" in text:
                text = text.replace("${" + name + "}", _ref_of(name))
        pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
        for name, local in pseudo.items():
            text = text.replace("${" + name + "}", local)
        assert "${" not in text, f"unresolved {text}"
        return text
    raise AssertionError(f"cannot read the resource {value}")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants() -> set[Request]:
    """Every (function, action, resource pattern) the template's Allow statements give."""
    found = set()
    for function, resource in template.resources("AWS::Serverless::Function").items():
        for policy in resource["Properties"].get("Policies", []):
            assert isinstance(policy, dict) and "Statement" in policy, (
                f"{function}: only inline statements can be checked, not {policy}"
            )
            for statement in policy["Statement"]:
                assert statement["Effect"] == "Allow", statement
                for action in _listed(statement["Action"]):
                    for arn in _listed(statement["Resource"]):
                        found.add(Request(function, action, _resource(arn)))
    return found


def allowed(request: Request, granted: set[Request]) -> bool:
    return any(
        grant.function == request.function
        and fnmatchcase(request.action, grant.action)
        and fnmatchcase(request.resource, grant.resource)
        for grant in granted
    )


# --- What the code asks for ---------------------------------------------------------------

_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _dynamodb_actions(operation: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    if operation in {"BatchGetItem", "BatchWriteItem"}:
        return [(f"dynamodb:{operation}", table_arn(name)) for name in body["RequestItems"]]
    if operation == "TransactWriteItems":
        return [
            (f"dynamodb:{_TRANSACT_WRITE[kind]}", table_arn(item[kind]["TableName"]))
            for item in body["TransactItems"]
            for kind in item
        ]
    if operation == "TransactGetItems":
        return [
            ("dynamodb:GetItem", table_arn(item["Get"]["TableName"]))
            for item in body["TransactItems"]
        ]
    arn = table_arn(body["TableName"])
    if "IndexName" in body:
        arn = f"{arn}/index/{body['IndexName']}"
    return [(f"dynamodb:{operation}", arn)]


def _sqs_actions(operation: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    action = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}.get(
        operation, operation
    )
    return [(f"sqs:{action}", queue_arn(body["QueueUrl"].rstrip("/").rsplit("/", 1)[-1]))]


def _bedrock_actions(operation: str, url_path: str) -> list[tuple[str, str]]:
    action = {"Converse": "InvokeModel", "ConverseStream": "InvokeModelWithResponseStream"}.get(
        operation, operation
    )
    model_id = unquote(url_path.split("/model/", 1)[1].split("/", 1)[0])
    return [(f"bedrock:{action}", model_arn(model_id))]


_S3_OBJECT_ACTIONS = {
    "CreateMultipartUpload": "PutObject",  # a multipart upload's steps are s3:PutObject
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "PutObject": "PutObject",
    "AbortMultipartUpload": "AbortMultipartUpload",
    "GetObject": "GetObject",
    "DeleteObject": "DeleteObject",
}
_S3_BUCKET_ACTIONS = {
    "ListObjectsV2": "ListBucket",
    "ListMultipartUploads": "ListBucketMultipartUploads",
}


def _s3_actions(operation: str, url: str, body: Any) -> list[tuple[str, str]]:
    """A request to moto's path-style URL (``/bucket/key``) as IAM sees it; DeleteObjects
    needs s3:DeleteObject on each key its XML body names."""
    bucket, _, key = unquote(urlsplit(url).path).lstrip("/").partition("/")
    arn = f"arn:aws:s3:::{bucket}"
    if operation == "DeleteObjects":
        keys = re.findall(r"<Key>(.*?)</Key>", bytes(body or b"").decode())
        return [("s3:DeleteObject", f"{arn}/{found}") for found in keys]
    if operation in _S3_BUCKET_ACTIONS:
        return [(f"s3:{_S3_BUCKET_ACTIONS[operation]}", arn)]
    return [(f"s3:{_S3_OBJECT_ACTIONS.get(operation, operation)}", f"{arn}/{key}")]


def _connection_action(method: str, url: str) -> tuple[str, str]:
    """``POST`` (or ``DELETE``) ``https://{apiId}.execute-api…/{stage}/@connections/{id}``
    as IAM sees it."""
    host, _, path = url.removeprefix("https://").partition("/")
    stage, _, connection = path.partition("/@connections/")
    arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{host.split('.')[0]}/{stage}"
    return "execute-api:ManageConnections", f"{arn}/{method}/@connections/{unquote(connection)}"


class Recorder:
    """The ``before-call`` hook: each request made during an invocation, under its function.
    A pre-signed URL is no request, but whoever follows it acts with the signer's role:
    ``presigned`` records the action it signs for."""

    def __init__(self) -> None:
        self.function: str | None = None
        self.seen: set[Request] = set()

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if self.function is None:  # the test's own set-up and the queue poller
            return
        service = model.service_model.service_name
        operation = model.name
        if service == "s3":
            actions = _s3_actions(operation, params["url"], params.get("body"))
            self.seen |= {Request(self.function, action, arn) for action, arn in actions}
            return
        body = json.loads(params.get("body") or b"{}")
        if service == "dynamodb":
            actions = _dynamodb_actions(operation, body)
        elif service == "sqs":
            actions = _sqs_actions(operation, body)
        elif service == "bedrock-runtime":
            actions = _bedrock_actions(operation, params["url_path"])
        elif service == "apigatewaymanagementapi":
            actions = [_connection_action(params["method"], params["url"])]
        elif service == "lambda":
            name = unquote(params["url_path"].split("/functions/", 1)[1].split("/", 1)[0])
            actions = [("lambda:InvokeFunction", function_arn(name))]
        else:
            actions = [(f"{service}:{operation}", "*")]
        self.seen |= {Request(self.function, action, arn) for action, arn in actions}

    def presigned(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if self.function is not None and context.get("is_presign_request"):
            arn = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
            self.seen.add(Request(self.function, "s3:GetObject", arn))


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """Hooks every client the handlers use: those already made, and those made later (the
    default session's hooks are copied into each new client)."""
    recording = Recorder()
    persistence_layer.cache_clear()  # made again, from the hooked session
    emitters = [
        boto3._get_default_session().events,  # boto3's own default session
        dynamodb_client().meta.events,
        sqs_client().meta.events,
        s3_client().meta.events,
    ]
    for emitter in emitters:
        emitter.register_first("before-call.*.*", recording, unique_id="least-privilege")
        emitter.register_first(
            "before-parameter-build.s3.GetObject", recording.presigned, unique_id="presigned"
        )
    real_invoke = runtime.invoke

    def invoke(function: str, event: dict[str, Any]) -> Any:
        recording.function = function
        try:
            return real_invoke(function, event)
        finally:
            recording.function = None

    monkeypatch.setattr(runtime, "invoke", invoke)
    yield recording
    for emitter in emitters:
        emitter.unregister("before-call.*.*", unique_id="least-privilege")
        emitter.unregister("before-parameter-build.s3.GetObject", unique_id="presigned")
    persistence_layer.cache_clear()


def _converse_reply(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12},
        "metrics": {"latencyMs": 5},
    }


# What a model on the JSON reply protocol answers: its reply and a memory update.
ENVELOPE = json.dumps(
    {
        "reply": "Noted.",
        "updates": {"remember": {"key": "tone", "value": "Keep it brief.", "category": "brand"}},
    }
)


@pytest.fixture
def bedrock(recorder: Recorder) -> Iterator[BedrockProvider]:
    """Bedrock as a chat model, answering from a stub in the order ``turns`` asks it, over
    HTTP then streamed: a native text reply and a JSON-protocol envelope, then a streamed
    native reply and the envelope again (the JSON protocol asks through Converse even when
    streamed, since the memory tools are offered). Made after the recorder, so its client
    carries the hook."""
    client = boto3.client("bedrock-runtime", region_name=REGION)
    stub = Stubber(client)
    stub.add_response("converse", _converse_reply("Noted."))
    stub.add_response("converse", _converse_reply(ENVELOPE))
    stub.add_response("converse_stream", {"stream": {"messageStart": {"role": "assistant"}}})
    stub.add_response("converse", _converse_reply(ENVELOPE))

    def streamed(parsed: dict[str, Any], **_: Any) -> None:
        parsed["stream"] = iter(
            [
                {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Noted."}}},
                {"messageStop": {"stopReason": "end_turn"}},
            ]
        )

    client.meta.events.register("after-call.bedrock-runtime.ConverseStream", streamed)
    with stub:
        yield BedrockProvider(client=client)
    model_choice().use(None)
    stub.assert_no_pending_responses()


class AnsweredLinks:
    """The deployed links (`AwsLinks`) on clients whose calls are recorded, then answered
    here: the management API keeps each frame, Lambda accepts the hand-off, which then
    runs the streaming worker as Lambda would."""

    CONNECTION = "ZJ8mMdXiIAMCJ-w="

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        endpoint = f"https://{WEBSOCKET_API}.execute-api.{REGION}.amazonaws.com/{WEBSOCKET_STAGE}"
        management = boto3.client("apigatewaymanagementapi", endpoint_url=endpoint)
        management.meta.events.register(
            "before-call.apigatewaymanagementapi.PostToConnection", self._posted
        )
        management.meta.events.register(
            "before-call.apigatewaymanagementapi.DeleteConnection", self._closed
        )
        functions = boto3.client("lambda", region_name=REGION)
        functions.meta.events.register("before-call.lambda.Invoke", self._accepted)
        self._aws = AwsLinks("WsStreamFunction", functions, management)

    def _posted(self, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.frames.append(json.loads(params["body"]))
        return AWSResponse(params["url"], 200, {}, None), {}

    @staticmethod
    def _closed(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse(params["url"], 204, {}, None), {}

    @staticmethod
    def _accepted(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse(params["url"], 202, {}, None), {"StatusCode": 202}

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        return self._aws.connection(domain, stage, connection_id)

    def hand_off(self, payload: dict[str, Any]) -> None:
        self._aws.hand_off(payload)
        runtime.invoke("WsStreamFunction", payload)

    def chat(
        self,
        project: str,
        message: str,
        conversation: str | None = None,
        *,
        refused: bool = False,
        **headers: str,
    ) -> Any:
        """One chat frame through the WebSocket functions; the ``done`` body (the
        ``error`` frame's, when ``refused``)."""
        body: dict[str, Any] = {"message": message}
        if conversation:
            body["conversationId"] = conversation
        frame = {"action": "chat", "projectId": project, "body": body}
        if "Idempotency-Key" in headers:
            frame["idempotencyKey"] = f"ws-{headers['Idempotency-Key']}"
        self.send(json.dumps(frame))
        assert self.frames[-1]["type"] == ("error" if refused else "done"), self.frames[-1]
        return self.frames[-1]["body"]

    def send(self, body: str, exp: str | None = None) -> None:
        event = websocket_event(
            "chat", "MESSAGE", self.CONNECTION, DEMO_USER, "ws", body=body, exp=exp
        )
        event["requestContext"].update(apiId=WEBSOCKET_API, stage=WEBSOCKET_STAGE)
        runtime.invoke("WsChatFunction", event)


def call(method: str, path: str, body: Any = None, *, refused: bool = False, **headers: str) -> Any:
    """One request through the real handler of its route, as the demo user; a 4xx when
    ``refused``, else a 2xx."""
    found = runtime.match_route(method, path)
    assert found, f"no route for {method} {path}"
    event = runtime.http_event(method, path, body=body, headers=headers, sub=DEMO_USER)
    reply = runtime.invoke(found[0].function, event)
    if refused:
        assert 400 <= reply["statusCode"] < 500, reply
    else:
        assert reply["statusCode"] < 300, reply
    return json.loads(reply["body"]) if reply.get("body") else None


def chat(
    project: str,
    message: str,
    conversation: str | None = None,
    *,
    refused: bool = False,
    **headers: str,
) -> Any:
    body: dict[str, Any] = {"message": message}
    if conversation:
        body["conversationId"] = conversation
    return call("POST", f"/projects/{project}/chat", body, refused=refused, **headers)


class ThreadGoneMeanwhile:
    """A model that, while it thinks, has the newest thread deleted under the turn that
    made it, so the save is refused and the turn abandons that thread."""

    def __init__(self, recorder: Recorder, project: str, model: ModelProvider) -> None:
        self._recorder = recorder
        self._project = project
        self._model = model

    def converse(self, request: ModelRequest) -> ModelReply:
        function, self._recorder.function = self._recorder.function, None
        store = conversation_store()
        newest = store.latest(DEMO_USER, self._project)
        assert newest is not None
        store.delete(DEMO_USER, self._project, newest.conversation_id)
        self._recorder.function = function
        return self._model.converse(request)


class RivalWriteFirst:
    """A model that, while it thinks, lets another writer change every persistent entry
    first, so the turn's save meets changed versions and reads its entries again."""

    def __init__(self, recorder: Recorder, project: str, model: ModelProvider) -> None:
        self._recorder = recorder
        self._project = project
        self._model = model
        self._done = False

    def converse(self, request: ModelRequest) -> ModelReply:
        if not self._done:
            self._done = True
            function, self._recorder.function = self._recorder.function, None
            store = memory_store()
            now = clock.now()
            for entry in store.active(DEMO_USER, self._project, None, now)[0]:
                store.write(DEMO_USER, self._project, entry.model_copy(update={"value": "x"}), now)
            self._recorder.function = function
        return self._model.converse(request)


def turns(recorder: Recorder, bedrock: BedrockProvider, say: Callable[..., Any]) -> tuple[str, str]:
    """Turns that save and forget memory (one idempotent, one on ``latest``, one on a
    thread grown past its window, one that meets its entries changed meanwhile, one through
    Bedrock, one through Bedrock on the JSON reply protocol, one whose new thread is gone
    before it saves); the project and thread they ran on."""
    project = seed_demo().project_id
    thread = say(project, "Always keep the header dark.")["conversation"]["id"]
    for _ in range(2):  # the retry is answered from the idempotency record
        say(project, "Never use bright blue anywhere.", thread, **{"Idempotency-Key": "k-1"})
    say(project, "Forget the header rule.", "latest")
    grow_thread(DEMO_USER, project, thread, 40)
    say(project, "I prefer short answers, always.", thread)
    model_choice().use(RivalWriteFirst(recorder, project, model_choice()("offline")))
    say(project, "I prefer short answers, always.", thread)
    model_choice().use(bedrock)
    say(project, "What colour is the header?", thread)
    model_choice().use(JsonProtocolProvider(bedrock))  # as for a JSON_PROTOCOL_MODEL_PREFIXES id
    say(project, "Keep it brief.", thread)
    model_choice().use(None)
    model_choice().use(ThreadGoneMeanwhile(recorder, project, model_choice()("offline")))
    say(project, "Plan the autumn sale.", refused=True)
    model_choice().use(None)
    return project, thread


def stall(project: str, import_id: str) -> None:
    """The import's progress as a dead-lettered second chunk leaves it, a day ago."""
    dynamodb_client().update_item(
        TableName=get_settings().imports_table,
        Key=import_key(DEMO_USER, project, progress_sk(import_id)),
        UpdateExpression="SET #status = :running, #updatedAt = :then, #done = :first",
        ExpressionAttributeNames={
            "#status": "status",
            "#updatedAt": "updatedAt",
            "#done": "doneChunks",
        },
        ExpressionAttributeValues={
            ":running": {"S": "running"},
            ":then": {"S": clock.stamp(clock.now() - timedelta(days=1))},
            ":first": {"NS": ["0"]},
        },
    )


def run_everything(
    store: embedded.EmbeddedStore, recorder: Recorder, bedrock: BedrockProvider
) -> None:
    """Every sample event, a refused WebSocket frame and one whose connection's token has
    expired (which closes the connection); then the same turns over HTTP and
    streamed over the WebSocket API (``turns``), thread memory and an entry that expires;
    an export imported back in two chunks, a large export and one too large; then the
    schedules, the worker on every job all that queued (extraction, the summary of a
    thread longer than the window, consolidation, import chunks), the thread's deletion,
    the caller's erasure of their data (their exports too), and the project's deletion,
    most of it by the worker."""
    links = AnsweredLinks()
    stream_links().use(links)
    try:
        for event_file in EVENT_FILES:
            seed_demo()
            if kind_of(load(event_file)) != "authorizer":  # it calls no AWS API
                runtime.invoke(function_of(event_file), load(event_file))
        links.send("{not a frame")  # the chat route answers an error frame itself
        links.send("{}", exp="1")  # and closes a connection whose token expired
        for say in (chat, links.chat):  # over HTTP, then streamed over the WebSocket API
            project, thread = turns(recorder, bedrock, say)
    finally:
        stream_links().use(None)
    memories = f"/projects/{project}/memories"
    note = {"value": "draft only", "category": "context", "scope": "thread"}
    call("PUT", f"{memories}/thread_note", {**note, "conversationId": thread})
    soon = clock.stamp(clock.now() + timedelta(seconds=1))
    call("PUT", f"{memories}/promo", {"value": "10% off", "category": "context", "expiresAt": soon})
    # The project's own export imported back, new each run and over two chunks, with the
    # memory history the sample's plain threads lack.
    document = call("GET", f"/projects/{project}/export")
    long = "y" * 10_000
    at = clock.stamp(clock.now() - timedelta(days=1))
    document["conversations"].append(
        {
            "id": "long",
            "title": f"Long {time.time_ns()}",
            "createdAt": at,
            "updatedAt": at,
            "messages": [
                {"id": str(n), "role": "user", "content": long, "createdAt": at} for n in range(40)
            ],
        }
    )
    imported = call("POST", f"/projects/{project}/import", document)
    large_exports(project)
    time.sleep(1.5)
    for event_file in EVENT_FILES:
        if event_file.name.startswith("maintenance-"):
            runtime.invoke(function_of(event_file), load(event_file))
    for poller in background.pollers(store):
        poller.drain(deadline_seconds=30)
    # The same import as if its second chunk's job had been dead-lettered a day ago: the
    # document sent again takes it up, and the worker finishes it.
    stall(project, imported["id"])
    call("POST", f"/projects/{project}/import", document)
    for poller in background.pollers(store):
        poller.drain(deadline_seconds=30)
    call("DELETE", f"/projects/{project}/conversations/{thread}")
    call("DELETE", f"/projects/{project}/me")  # its idempotency record too
    seed_demo()
    chat(project, "A thread for the worker to erase.", **{"Idempotency-Key": "k-2"})
    thread_elsewhere = {
        "title": "Elsewhere",
        "messages": [{"role": "user", "content": "hi", "createdAt": at}],
    }
    call(
        "POST", f"/projects/{project}/import", {"format": "threads", "threads": [thread_elsewhere]}
    )
    large_exports(project)  # left for the worker's erasure
    delete_through_the_worker(store, project)


def large_exports(project: str) -> None:
    """The project's export as JSON Lines in the exports bucket, behind a pre-signed link,
    then one past EXPORT_LINES_MAX_BYTES, whose parts are dropped."""
    service = data_service()
    settings = service._settings
    try:
        service._settings = settings.model_copy(update={"export_max_bytes": 0})
        assert call("GET", f"/projects/{project}/export")["format"] == "recall.export.jsonl"
        service._settings = settings.model_copy(
            update={"export_max_bytes": 0, "export_lines_max_bytes": 1}
        )
        event = runtime.http_event("GET", f"/projects/{project}/export", sub=DEMO_USER)
        assert runtime.invoke("DataFunction", event)["statusCode"] == 413
    finally:
        service._settings = settings


def delete_through_the_worker(store: embedded.EmbeddedStore, project: str) -> None:
    """The project's deletion with room for a few items a run, so the request answers 202
    and the worker erases the rest, its idempotency records among them, a run at a time."""
    erasure = erasure_service()
    budget = erasure._budget  # a small budget stands in for a large project
    erasure._budget = 1
    try:
        call("DELETE", f"/projects/{project}")
        for poller in background.pollers(store):
            poller.drain(deadline_seconds=60)
    finally:
        erasure._budget = budget


def test_every_request_a_function_makes_is_granted_by_its_own_policy(
    embedded_store: embedded.EmbeddedStore, recorder: Recorder, bedrock: BedrockProvider
) -> None:
    # Given what the template grants
    granted = grants()
    # When every function runs every path the events and background jobs take
    run_everything(embedded_store, recorder, bedrock)
    # Then each request's action is allowed on its resource by that function's statements
    denied = sorted(
        f"{request.function}: {request.action} on {request.resource}"
        for request in recorder.seen
        if not allowed(request, granted)
    )
    assert recorder.seen, "nothing was recorded"
    # every function with a policy made requests (the authorizer calls no AWS API)
    assert {request.function for request in recorder.seen} == {grant.function for grant in granted}
    assert not denied, "requests the template does not allow:\n" + "\n".join(denied)
    # And nothing is granted that no request used, save what only AWS can exercise
    unused = sorted(
        f"{grant.function}: {grant.action} on {grant.resource}"
        for grant in granted
        if (grant.function, grant.action, grant.resource) not in NOT_REACHED_HERE
        and not any(
            request.function == grant.function
            and fnmatchcase(request.action, grant.action)
            and fnmatchcase(request.resource, grant.resource)
            for request in recorder.seen
        )
    )
    assert not unused, "grants no request used:\n" + "\n".join(unused)
