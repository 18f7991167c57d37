"""Bodies no parser should ever see get a 400 with the API's error body, on every route
that takes one: bytes that are not UTF-8 (API Gateway base64-encodes them) and JSON nested
deeper than any request needs (a recursive parser would fail with a 500); and bodies
Python's parser reads differently from JSON (an integer it will not read, ``NaN``) too."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
import pytest

from local import openapi, runtime, template
from local.seed import seed_project

USER = "hostile-body-user"
PROJECT = "01M8MKH0STB0DY000000000000"
THREAD = "01M8MKH0STB0DY000000000001"
PRESET = "01M8MKH0STB0DY000000000002"
PATH_VALUES = {
    "projectId": PROJECT,
    "conversationId": THREAD,
    "key": "tone",
    "userId": "someone",
    "presetId": PRESET,
}
BODY_ROUTES = [route for route in template.routes() if route.method in {"POST", "PUT", "PATCH"}]
FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


NOT_UTF8 = st.binary(min_size=1, max_size=64).filter(_not_utf8)
OPENERS = st.lists(st.sampled_from(["[", '{"a":']), min_size=33, max_size=10_000)


@pytest.fixture(scope="module", autouse=True)
def hostile_project(embedded_store: Any) -> None:
    """A project and thread the caller owns, so nothing stops a request before the body."""
    seed_project(USER, PROJECT, THREAD)


def _send(route: template.Route, body: bytes | str) -> dict[str, Any]:
    path = route.path
    for name in route.pattern.groupindex:
        path = path.replace("{" + name + "}", PATH_VALUES[name])
    event = runtime.http_event(route.method, path, body=body, sub=USER)
    reply: dict[str, Any] = runtime.invoke(route.function, event)
    return reply


@FAST
@given(route=st.sampled_from(BODY_ROUTES), data=NOT_UTF8)
def test_a_body_that_is_not_utf8_is_a_400(route: template.Route, data: bytes) -> None:
    # Given bytes that are not UTF-8, which API Gateway sends base64-encoded
    # When they are the body of any route that takes one
    reply = _send(route, data)

    # Then the answer is 400 with the API's error body
    assert reply["statusCode"] == 400, (route.route_key, data, reply)
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "malformed_json"
    assert error["message"], reply


@FAST
@given(route=st.sampled_from(BODY_ROUTES), openers=OPENERS)
@example(route=BODY_ROUTES[0], openers=["["] * 10_000)
def test_json_nested_too_deep_is_a_400(route: template.Route, openers: list[str]) -> None:
    # Given JSON nested from 33 up to 10,000 levels deep, closed properly
    closers = "".join("]" if opener == "[" else "}" for opener in reversed(openers))
    body = "".join(openers) + "1" + closers

    # When it is the body of any route that takes one
    reply = _send(route, body)

    # Then the answer is 400 with the API's error body
    assert reply["statusCode"] == 400, (route.route_key, reply)
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "malformed_json"
    assert error["message"], reply


LONE_SURROGATE = st.integers(min_value=0xD800, max_value=0xDFFF).map(lambda cp: f"\\u{cp:04x}")
FIELD = st.sampled_from(["message", "name", "title", "value", "role", "context.type", "key:"])


@FAST
@given(
    route=st.sampled_from(BODY_ROUTES),
    surrogate=LONE_SURROGATE,
    field=FIELD,
    around=st.tuples(st.text(max_size=8), st.text(max_size=8)),
)
def test_a_body_escaping_a_lone_surrogate_is_a_400(
    route: template.Route, surrogate: str, field: str, around: tuple[str, str]
) -> None:
    # Given valid JSON whose string escapes half a surrogate pair: no UTF-8 can hold it,
    # and DynamoDB refuses it (the store's client here refuses it as AWS would)
    before, after = (json.dumps(part)[1:-1] for part in around)
    text = f'"{before}{surrogate}{after}"'
    if field == "key:":
        body = "{" + text + ': "dark", "message": "hi"}'
    elif "." in field:
        body = '{"name": "Shop", "context": {"type": ' + text + "}}"
    else:
        body = '{"' + field + '": ' + text + ', "category": "brand"}'

    # When it is the body of any route that takes one
    reply = _send(route, body)

    # Then the answer is 400 with the API's error body, never a 500 from the store
    assert reply["statusCode"] == 400, (route.route_key, body, reply)
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "malformed_json"
    assert error["message"], reply


def test_a_surrogate_pair_escaped_in_json_is_text_and_is_kept() -> None:
    route = next(r for r in BODY_ROUTES if r.route_key == "POST /projects/{projectId}/chat")
    reply = _send(route, '{"message": "grin \\ud83d\\ude00 and an escaped \\\\ud800"}')
    assert reply["statusCode"] == 200, reply


# Python reads no integer literal over 4,300 digits (nor does the Lambda runtime's Python):
# its parser raises a plain ValueError there, not the JSONDecodeError Powertools answers.
TOO_LONG_AN_INTEGER = "9" * 4_301
# The routes that read their body (the others, such as clear-context, ignore any body).
OPERATIONS = openapi.document()["paths"]
READ_BODY = [
    route for route in BODY_ROUTES if "requestBody" in OPERATIONS[route.path][route.method.lower()]
]


@pytest.mark.parametrize("route", READ_BODY, ids=lambda route: route.route_key)
def test_an_integer_too_long_for_python_to_read_is_a_400(route: template.Route) -> None:
    # Given a body of 4 KB, far under the size limit, holding a 4,301-digit integer
    body = '{"name": "x", "message": "hi", "n": ' + TOO_LONG_AN_INTEGER + "}"

    # When it is the body of any route that reads one
    reply = _send(route, body)

    # Then the answer is 400 with the API's error body, never a 500
    assert reply["statusCode"] == 400, (route.route_key, reply)
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "malformed_json"
    assert error["message"], reply


@pytest.mark.parametrize("route", READ_BODY, ids=lambda route: route.route_key)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_has_no_place_for_is_a_400(route: template.Route, literal: str) -> None:
    # Given a body Python's parser reads but RFC 8259 does not: NaN or an infinity
    body = '{"name": "x", "message": "hi", "turnsPerDay": ' + literal + "}"

    # When it is the body of any route that reads one
    reply = _send(route, body)

    # Then it is refused as not JSON, not as a field that holds no valid number or string
    assert reply["statusCode"] == 400, (route.route_key, reply)
    error = json.loads(reply["body"])["error"]
    assert error["code"] == "malformed_json"
    assert error["message"], reply
