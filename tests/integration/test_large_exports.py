"""Exports past EXPORT_MAX_BYTES, through the real handlers over the embedded DynamoDB and
S3: JSON Lines written to the exports bucket in parts, answered with a pre-signed link
that is then downloaded, as a client would, and read back line by line."""

from __future__ import annotations

from collections.abc import Callable
import json
from typing import Any
import urllib.request

from botocore.exceptions import ClientError

from local.seed import grow_thread
from recall.settings import get_settings
from recall.store.exports import s3_client
from tests.integration.aws_limits import PART_MIN_BYTES, S3Limits
from tests.integration.conftest import Api, exported_objects

MakeProject = Callable[..., str]
Settings = Callable[..., None]


def say(api: Api, project: str, message: str, conversation: str | None = None) -> Any:
    body: dict[str, Any] = {"message": message}
    if conversation:
        body["conversationId"] = conversation
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    return reply.body


def fill(api: Api, project: str) -> None:
    """Two threads, memory of both scopes with history."""
    first = say(api, project, "Always keep the header dark")["conversation"]["id"]
    say(api, project, "Never use rounded buttons", first)
    second = say(api, project, "Draft the spring newsletter")["conversation"]["id"]
    memories = f"/projects/{project}/memories"
    note = {"value": "draft", "category": "context", "scope": "thread", "conversationId": second}
    assert api.put(f"{memories}/thread_note", note).status == 201
    assert api.put(f"{memories}/tone", {"value": "warm", "category": "preferences"}).status == 201
    assert api.put(f"{memories}/tone", {"value": "dry", "category": "preferences"}).status == 200


def download(url: str) -> bytes:
    """What the link answers: an attachment, so a browser saves it rather than show it."""
    with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 (the test's own URL)
        assert answer.headers["Content-Disposition"].startswith("attachment; filename=")
        assert answer.headers["Content-Type"] == "application/x-ndjson"
        body: bytes = answer.read()
    return body


def read_lines(body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header, and the lines put together as the one-document export's parts."""
    header, *rest = [json.loads(line) for line in body.decode().splitlines()]
    conversations: list[dict[str, Any]] = []
    memories: list[dict[str, Any]] = []
    presets: list[dict[str, Any]] = []
    project = None
    for line in rest:
        kind = line.pop("type")
        if kind == "conversation":
            conversations.append({**line, "messages": []})
        elif kind == "message":
            owner = line.pop("conversationId")
            assert conversations[-1]["id"] == owner, "a message line follows its conversation"
            conversations[-1]["messages"].append(line)
        elif kind == "memory":
            memories.append(line)
        elif kind == "preset":
            presets.append(line)
        else:
            assert kind == "project", kind
            project = line
    parts = {"conversations": conversations, "memories": memories, "presets": presets}
    return header, {**parts, "project": project}


def parts_of(document: dict[str, Any]) -> dict[str, Any]:
    return {key: document.get(key) for key in ("conversations", "memories", "presets", "project")}


def large_export(api: Api, project: str) -> tuple[dict[str, Any], bytes]:
    reply = api.get(f"/projects/{project}/export")
    assert reply.status == 200, reply
    assert reply.body["format"] == "recall.export.jsonl", reply
    return reply.body, download(reply.body["url"])


def test_a_large_export_is_json_lines_behind_a_link_holding_what_the_document_holds(
    alice: Api, make_project: MakeProject, export_settings: Settings
) -> None:
    # Given a project with threads, memory and a preset, and its one-document export
    project = make_project(alice)
    fill(alice, project)
    preset = {"name": "Voice", "contextPrompts": [{"role": "user", "content": "Be brief."}]}
    assert alice.post(f"/projects/{project}/presets", preset).status == 201
    whole = alice.get(f"/projects/{project}/export")
    assert whole.status == 200 and whole.body["format"] == "recall.export", whole
    # When the same project is past the threshold
    export_settings(export_max_bytes=500)
    link, body = large_export(alice, project)
    # Then the link answers the JSON Lines, with exactly the document's data
    header, parts = read_lines(body)
    exported_at = header.pop("exportedAt")
    assert header == {
        "format": "recall.export.jsonl",
        "version": 2,
        "projectId": project,
        "userId": alice.sub,
    }
    assert parts == parts_of(whole.body)
    assert parts["project"]["members"] == [{"userId": alice.sub, "role": "owner"}]
    assert [line["name"] for line in parts["presets"]] == ["Voice"]
    assert link["version"] == 2 and link["bytes"] == len(body)
    assert link["expiresAt"] > exported_at


def test_a_history_longer_than_a_part_goes_up_part_by_part_as_each_fills(
    alice: Api, make_project: MakeProject, s3_limits: S3Limits
) -> None:
    # Given a thread of over two parts' worth, past the default threshold
    project = make_project(alice)
    thread = say(alice, project, "Start")["conversation"]["id"]
    line = 16_000
    count = 2 * PART_MIN_BYTES // line + 50
    grow_thread(alice.sub or "", project, thread, count, lambda n: f"{n:05d}" + "x" * line)
    assert count * line > get_settings().export_max_bytes
    # When
    link, body = large_export(alice, project)
    # Then every part but the last is one part's size and at most one line over, so the
    # upload never held more than a part and a line
    (sizes,) = s3_limits.sizes()
    assert len(sizes) == 3, sizes
    assert all(PART_MIN_BYTES <= size < PART_MIN_BYTES + 2 * line for size in sizes[:-1])
    assert sum(sizes) == link["bytes"] == len(body)
    # And every message is there, once, in order
    _, parts = read_lines(body)
    (conversation,) = parts["conversations"]
    contents = [message["content"] for message in conversation["messages"]]
    assert contents[0] == "Start"
    assert [content[:5] for content in contents[2:]] == [f"{n:05d}" for n in range(count)]


def test_a_viewer_gets_a_large_export_and_a_stranger_a_403(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject, export_settings: Settings
) -> None:
    # Given bob's threads from when he was an editor, now a viewer
    project = make_project(alice, {bob: "editor"})
    fill(alice, project)
    fill(bob, project)
    assert alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"}).status == 200
    whole = bob.get(f"/projects/{project}/export").body
    export_settings(export_max_bytes=0)
    # When
    viewer = bob.get(f"/projects/{project}/export")
    stranger = carol.get(f"/projects/{project}/export")
    # Then the viewer gets his own threads and memory, and no project line
    assert viewer.status == 200, viewer
    header, parts = read_lines(download(viewer.body["url"]))
    assert header["userId"] == bob.sub
    assert parts == parts_of(whole) and len(parts["conversations"]) == 2
    assert parts["project"] is None
    assert stranger.status == 403, stranger
    assert exported_objects(carol.sub or "", project) == []


def test_two_users_in_two_projects_each_get_only_their_own_large_export(
    alice: Api, bob: Api, make_project: MakeProject, export_settings: Settings
) -> None:
    # Given both users' threads in two projects
    projects = [make_project(alice, {bob: "editor"}) for _ in range(2)]
    titles = {}
    for api in (alice, bob):
        for project in projects:
            reply = say(api, project, f"Thread of {api.sub} in {project}")
            titles[(api.sub, project)] = reply["conversation"]["title"]
    export_settings(export_max_bytes=0)
    for api in (alice, bob):
        for project in projects:
            # When
            _, body = large_export(api, project)
            # Then
            header, parts = read_lines(body)
            assert (header["userId"], header["projectId"]) == (api.sub, project)
            found = [thread["title"] for thread in parts["conversations"]]
            assert found == [titles[(api.sub, project)]]
            assert len(exported_objects(api.sub or "", project)) == 1


def test_an_export_past_what_one_request_writes_is_a_413_and_leaves_nothing(
    alice: Api, make_project: MakeProject, export_settings: Settings
) -> None:
    # Given
    project = make_project(alice)
    fill(alice, project)
    export_settings(export_max_bytes=0, export_lines_max_bytes=1_000)
    # When
    reply = alice.get(f"/projects/{project}/export")
    # Then
    assert reply.status == 413, reply
    assert reply.body["error"]["code"] == "payload_too_large"
    assert "EXPORT_LINES_MAX_BYTES" in reply.body["error"]["message"]
    assert exported_objects(alice.sub or "", project) == []
    uploads = s3_client().list_multipart_uploads(Bucket=get_settings().exports_bucket)
    assert [upload for upload in uploads.get("Uploads", []) if project in upload["Key"]] == []


def test_an_export_s3_fails_to_store_is_a_503_and_leaves_nothing(
    alice: Api, make_project: MakeProject, export_settings: Settings, monkeypatch: Any
) -> None:
    # Given S3 failing every part
    project = make_project(alice)
    fill(alice, project)
    export_settings(export_max_bytes=0)
    client = s3_client()

    def failing(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "UploadPart")

    monkeypatch.setattr(client, "upload_part", failing)
    # When
    reply = alice.get(f"/projects/{project}/export")
    # Then
    assert reply.status == 503, reply
    uploads = client.list_multipart_uploads(Bucket=get_settings().exports_bucket)
    assert [upload for upload in uploads.get("Uploads", []) if project in upload["Key"]] == []


def test_a_small_export_stays_one_document(alice: Api, make_project: MakeProject) -> None:
    # Given
    project = make_project(alice)
    fill(alice, project)
    # When
    reply = alice.get(f"/projects/{project}/export")
    # Then
    assert reply.status == 200 and reply.body["format"] == "recall.export", reply
    assert exported_objects(alice.sub or "", project) == []


def test_an_export_finished_after_its_user_began_erasing_is_deleted_not_linked(
    alice: Api, bob: Api, make_project: MakeProject, export_settings: Settings
) -> None:
    # Given bob erases himself while his export's last part goes up
    project = make_project(alice, {bob: "editor"})
    fill(bob, project)
    export_settings(export_max_bytes=0)
    events = s3_client().meta.events

    def erase_first(**_: Any) -> None:
        events.unregister("before-call.s3.CompleteMultipartUpload", unique_id="race")
        assert bob.delete(f"/projects/{project}/me").status == 204

    events.register("before-call.s3.CompleteMultipartUpload", erase_first, unique_id="race")
    try:
        # When
        reply = bob.get(f"/projects/{project}/export")
    finally:
        events.unregister("before-call.s3.CompleteMultipartUpload", unique_id="race")
    # Then
    assert reply.status == 403, reply
    assert exported_objects(bob.sub or "", project) == []
