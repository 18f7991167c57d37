"""The API publishes one OpenAPI document that matches the code and the template."""

from __future__ import annotations

import json

from local import openapi, runtime, template
from recall.api import contract


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


def test_every_template_route_has_one_row_in_the_contract_table() -> None:
    routes = {f"{r.method} {r.path}" for r in template.routes() if r.path != "/openapi.json"}
    assert set(contract.ROUTES) == routes


def test_every_operation_needs_a_bearer_jwt() -> None:
    # Given
    document = json.loads(openapi.DOCUMENT.read_text())
    # When
    schemes = document["components"]["securitySchemes"]
    securities = [
        operation.get("security")
        for operations in document["paths"].values()
        for operation in operations.values()
    ]
    # Then
    assert schemes == {
        "jwt": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": schemes["jwt"]["description"],
        }
    }
    assert securities == [[{"jwt": []}]] * len(securities)


def test_every_error_carries_the_error_body_and_gateway_answers_their_own() -> None:
    # Given
    document = json.loads(openapi.DOCUMENT.read_text())
    ours = {"$ref": "#/components/schemas/ErrorBody"}
    gateways = {"$ref": "#/components/schemas/GatewayMessage"}
    # When
    errors = {
        (path, method, int(status)): response["content"]["application/json"]["schema"]
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if int(status) >= 400
    }
    # Then
    for (path, method, status), schema in errors.items():
        expected = [gateways, ours] if status in contract.GATEWAY_TOO else None
        assert schema.get("anyOf", schema) == (expected or ours), (path, method, status)
    assert {status for _, _, status in errors} == {
        400,
        401,
        403,
        404,
        409,
        413,
        415,
        422,
        429,
        502,
        503,
        504,
    }


def test_a_generated_client_can_send_an_idempotency_key_and_read_retry_after() -> None:
    # Given
    document = json.loads(openapi.DOCUMENT.read_text())
    chat = document["paths"]["/projects/{projectId}/chat"]["post"]
    # When
    headers = [p for p in chat["parameters"] if p["in"] == "header"]
    retried = {
        int(status)
        for operations in document["paths"].values()
        for operation in operations.values()
        for status, response in operation["responses"].items()
        if "Retry-After" in response.get("headers", {})
    }
    # Then the chat turn takes the key the README's retries rely on, and every status
    # that may say when to try again declares the header
    assert [(p["name"], p["required"], p["schema"]["maxLength"]) for p in headers] == [
        ("Idempotency-Key", False, 255)
    ]
    assert retried == {409, 429, 503}
    assert all(
        "Retry-After" in operation["responses"][str(status)]["headers"]
        for operations in document["paths"].values()
        for operation in operations.values()
        for status in (429, 503)
    )
