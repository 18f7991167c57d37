"""The API publishes one OpenAPI document that matches the code and the template."""

from __future__ import annotations

import json

from local import openapi, runtime, template


def test_the_published_document_is_current() -> None:
    assert openapi.DOCUMENT.read_text() == openapi.rendered(), "run `make openapi`"


def test_every_template_route_is_documented_and_served_without_a_token() -> None:
    event = runtime.http_event("GET", "/openapi.json")
    reply = runtime.invoke("ProjectsFunction", event)
    assert reply["statusCode"] == 200
    document = json.loads(reply["body"])
    documented = {
        (method.upper(), path.replace("<", "{").replace(">", "}"))
        for path, operations in document["paths"].items()
        for method in operations
    }
    routes = {(r.method, r.path) for r in template.routes() if r.path != "/openapi.json"}
    assert routes <= documented


def test_the_chat_route_documents_its_reply_with_every_field() -> None:
    # Given
    document = json.loads(openapi.DOCUMENT.read_text())
    # When
    ok = document["paths"]["/projects/{projectId}/chat"]["post"]["responses"]["200"]
    reference = ok["content"]["application/json"]["schema"]["$ref"]
    reply = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    # Then
    assert reference.endswith("/ChatReply")
    assert set(reply["properties"]) == {
        "conversation",
        "message",
        "memoriesSaved",
        "memoriesForgotten",
        "nudge",
        "usage",
    }
    assert set(reply["required"]) == set(reply["properties"])
