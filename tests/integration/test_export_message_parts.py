"""A message's tool calls, tool results and usage in an export are spelled as the chat reply
and GET conversation spell them, and come back whole from an import in either spelling."""

from __future__ import annotations

from collections.abc import Callable
import copy
from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_export_and_import import MakeProject, import_done, say

SNAKE_USAGE = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cache_read_input_tokens": "cacheReadInputTokens",
    "cache_write_input_tokens": "cacheWriteInputTokens",
}


def last_message(document: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = document["conversations"][0]["messages"][-1]
    return message


def tool_message(document: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in document["conversations"][0]["messages"] if m["toolResults"])


def test_an_exported_message_spells_usage_and_tool_results_as_the_api_does(
    alice: Api, make_project: MakeProject
) -> None:
    # Given: a turn whose model saved a memory entry
    project = make_project(alice)
    reply = say(alice, project, "Always keep the header dark")
    thread = reply["conversation"]["id"]
    shown = alice.get(f"/projects/{project}/conversations/{thread}").body["messages"]
    # When
    exported = alice.get(f"/projects/{project}/export").body
    # Then
    assert last_message(exported)["usage"] == reply["message"]["usage"] == shown[-1]["usage"]
    assert set(last_message(exported)["usage"]) == set(SNAKE_USAGE.values())
    shown_tool = next(m for m in shown if m["toolResults"])
    assert tool_message(exported)["toolResults"] == shown_tool["toolResults"]
    assert "toolCallId" in tool_message(exported)["toolResults"][0]


def test_usage_and_tool_results_in_either_spelling_import_whole(
    alice: Api, make_project: MakeProject, drain: Callable[[], None]
) -> None:
    # Given: the export as it is (camelCase), and as exports were written before (snake_case)
    source = make_project(alice)
    say(alice, source, "Always keep the header dark")
    exported = alice.get(f"/projects/{source}/export").body
    usage, results = last_message(exported)["usage"], tool_message(exported)["toolResults"]
    assert usage["inputTokens"] > 0
    older = copy.deepcopy(exported)
    last_message(older)["usage"] = {snake: usage[camel] for snake, camel in SNAKE_USAGE.items()}
    tool_message(older)["toolResults"] = [
        {"tool_call_id": r["toolCallId"], "content": r["content"], "is_error": r["isError"]}
        for r in results
    ]
    for document in (exported, older):
        # When
        target = make_project(alice)
        progress = import_done(alice, target, document, drain)
        # Then
        assert progress["status"] == "done", progress
        again = alice.get(f"/projects/{target}/export").body
        assert last_message(again)["usage"] == usage
        assert tool_message(again)["toolResults"] == results


def test_a_misspelt_usage_field_is_refused_not_lost(alice: Api, make_project: MakeProject) -> None:
    # Given
    project = make_project(alice)
    say(alice, project, "hello")
    document = alice.get(f"/projects/{project}/export").body
    last_message(document)["usage"] = {"inputTokenz": 5}
    # When
    reply = alice.post(f"/projects/{make_project(alice)}/import", document)
    # Then
    assert reply.status == 422, reply
    fields = [detail["field"] for detail in reply.body["error"]["details"]]
    assert any(field.endswith("usage.inputTokenz") for field in fields), fields
