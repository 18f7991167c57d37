"""The one-document export is counted as it is sent: UTF-8 JSON whose size, and the size
Lambda hands API Gateway, never pass EXPORT_MAX_BYTES, whatever the script of its text;
and what is downloaded imports back."""

from __future__ import annotations

from collections.abc import Callable
import json
from typing import Any

import pytest

from recall.settings import get_settings
from tests.integration.conftest import Api

MakeProject = Callable[..., str]
Settings = Callable[..., None]
LIMIT = 200_000


def fill(api: Api, project: str, text: str, turns: int) -> None:
    conversation: str | None = None
    for _ in range(turns):
        body: dict[str, Any] = {"message": text}
        if conversation:
            body["conversationId"] = conversation
        reply = api.post(f"/projects/{project}/chat", body)
        assert reply.status == 200, reply
        conversation = reply.body["conversation"]["id"]


def sent(reply: Any) -> bytes:
    """The body's bytes as the client gets them."""
    assert not reply.raw["isBase64Encoded"]
    body: str = reply.raw["body"]
    return body.encode()


def carried(reply: Any) -> int:
    """The body's bytes in Lambda's reply to API Gateway: a JSON string, in UTF-8."""
    return len(json.dumps(reply.raw["body"], ensure_ascii=False).encode()) - 2


@pytest.mark.parametrize("text", ["😀" * 4_000, "中" * 5_000])
def test_an_inline_export_of_any_script_is_within_the_limit_as_sent(
    alice: Api, make_project: MakeProject, export_settings: Settings, text: str
) -> None:
    # Given: about 100 KB of UTF-8 text, three times that as \u escapes
    project = make_project(alice)
    fill(alice, project, text, 6)
    export_settings(export_max_bytes=LIMIT)
    # When
    reply = alice.get(f"/projects/{project}/export")
    # Then
    assert reply.status == 200 and reply.body["format"] == "recall.export", reply
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    assert len(sent(reply)) <= carried(reply) <= LIMIT
    assert text.encode() in sent(reply)


@pytest.mark.parametrize("held", ["emoji", "quotes", "one memory"])
def test_an_export_one_byte_past_what_it_sends_is_a_link(
    alice: Api, make_project: MakeProject, export_settings: Settings, held: str
) -> None:
    # Given: the inline answer's own sizes
    project = make_project(alice)
    if held == "one memory":
        entry = {"value": "dark header", "category": "brand"}
        assert alice.put(f"/projects/{project}/memories/header", entry).status == 201
    else:
        fill(alice, project, "😀" * 4_000 if held == "emoji" else '"\\' * 4_000, 3)
    inline = alice.get(f"/projects/{project}/export")
    assert inline.body["format"] == "recall.export", inline
    # When: the limit is one byte under the body as sent, then as Lambda carries it
    answers = []
    for limit in (len(sent(inline)) - 1, carried(inline) - 1):
        export_settings(export_max_bytes=limit)
        answers.append(alice.get(f"/projects/{project}/export"))
    # Then
    assert [answer.body["format"] for answer in answers] == ["recall.export.jsonl"] * 2
    assert all(len(sent(answer)) < 1_000 for answer in answers)


@pytest.mark.parametrize("text", ["😀" * 4_000, '"\\' * 4_000], ids=["emoji", "quotes"])
def test_a_downloaded_inline_export_imports_back_under_the_same_limit(
    alice: Api,
    make_project: MakeProject,
    export_settings: Settings,
    drain: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
) -> None:
    # Given: an inline export just within EXPORT_MAX_BYTES, and IMPORT_MAX_BYTES the same;
    # both count a quote or backslash as the events carry it (the export's answer, the
    # import's request)
    source = make_project(alice)
    fill(alice, source, text, 6)
    export_settings(export_max_bytes=LIMIT)
    downloaded = sent(alice.get(f"/projects/{source}/export"))
    assert json.loads(downloaded)["format"] == "recall.export"
    tight = get_settings().model_copy(update={"import_max_bytes": LIMIT})
    monkeypatch.setattr("recall.api.http.get_settings", lambda: tight)
    # When: the file is sent back as it was saved
    target = make_project(alice)
    started = alice.post(f"/projects/{target}/import", downloaded)
    drain()
    # Then
    assert started.status == 202, started
    progress = alice.get(started.headers["Location"]).body
    assert (progress["status"], progress["threadsDone"]) == ("done", 1), progress
    again = alice.get(f"/projects/{target}/export").body["conversations"][0]["messages"]
    assert [m["content"] for m in again] == [
        m["content"] for m in json.loads(downloaded)["conversations"][0]["messages"]
    ]
