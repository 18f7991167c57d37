"""A ``chat`` frame sent again under its idempotency key is answered from the record only
while its sender may still chat in the project, as ``POST /chat`` is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recall.wiring import stream_links
from tests.integration.conftest import Api
from tests.integration.test_chat_over_websocket import MakeProject, RecordingLinks, Socket


@pytest.fixture
def links() -> Iterator[RecordingLinks]:
    recording = RecordingLinks()
    stream_links().use(recording)
    yield recording
    stream_links().use(None)


def test_a_member_removed_since_their_keyed_frame_gets_an_error_403_not_the_recorded_done(
    alice: Api, bob: Api, make_project: MakeProject, links: RecordingLinks
) -> None:
    # Given bob's keyed frame was answered and recorded
    project = make_project(alice, {bob: "editor"})
    socket = Socket(bob, links)
    first = socket.chat(project, "hello", idempotencyKey="retry-after-removal", requestId="r-1")
    assert first[-1]["type"] == "done" and first[-1]["status"] == 200, first[-1]
    thread = first[-1]["body"]["conversation"]["id"]
    # And then alice removed him from the project
    assert alice.delete(f"/projects/{project}/members/{bob.sub}").status == 204
    # When he sends the same frame again
    again = socket.chat(project, "hello", idempotencyKey="retry-after-removal", requestId="r-1")
    # Then he is refused as POST /chat refuses him, not answered from the record
    http = bob.post(f"/projects/{project}/chat", {"message": "hello", "conversationId": thread})
    assert http.status == 403, http
    assert again == [{"type": "error", "requestId": "r-1", "status": 403, "body": http.body}]
