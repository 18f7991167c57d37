"""Whatever a client sends, the answer is never a 500: bounded fuzzing of every route with
arbitrary JSON bodies, query strings and path values."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from local import runtime, template
from local.seed import seed_project
from tests.integration.any_json import any_json

JSON = any_json(st.text(max_size=40))
FIELDS = st.sampled_from(
    [
        "name",
        "context",
        "role",
        "title",
        "archived",
        "message",
        "conversationId",
        "model",
        "value",
        "category",
        "scope",
        "expiresAt",
    ]
)
BODIES = st.one_of(
    JSON,
    st.dictionaries(FIELDS, JSON, max_size=5),
    st.text(max_size=60).map(lambda text: text.encode()),
)
FUZZ_USER = "fuzz-user"
PROJECT = "01M8MKFUZZ0000000000000000"
THREAD = "01M8MKFUZZ0000000000000001"
SEGMENT = st.one_of(
    st.sampled_from([PROJECT, THREAD, "latest", "tone", FUZZ_USER]),
    st.text(
        alphabet=st.characters(blacklist_characters="/?#", blacklist_categories=("Cs",)),
        min_size=1,
        max_size=30,
    ),
)
QUERY = st.dictionaries(
    st.sampled_from(["limit", "cursor", "archived", "category", "conversationId"]),
    st.text(alphabet="abcXYZ019-_=%.", max_size=20),
    max_size=3,
).map(lambda pairs: "&".join(f"{key}={value}" for key, value in pairs.items()))
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "APPLICATION/JSON; charset=UTF-8",
        "application/jsonx",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ]
)
ROUTES = template.routes()


@pytest.fixture(scope="module", autouse=True)
def fuzz_project(embedded_store: Any) -> None:
    """A project and thread the fuzzing caller owns, so requests get past the role check."""
    seed_project(FUZZ_USER, PROJECT, THREAD)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    route=st.sampled_from(ROUTES),
    segments=st.lists(SEGMENT, min_size=3, max_size=3),
    body=BODIES,
    query=QUERY,
    content_type=CONTENT_TYPES,
)
def test_no_request_gets_a_500(
    route: template.Route, segments: list[str], body: Any, query: str, content_type: str
) -> None:
    values = iter(segments)
    path = route.path
    for name in route.pattern.groupindex:
        path = path.replace("{" + name + "}", next(values))
    raw = body if isinstance(body, bytes) else json.dumps(body)
    headers = {"content-type": content_type} if content_type else {}
    event = runtime.http_event(
        route.method, path, body=raw, query=query, headers=headers, sub=FUZZ_USER
    )
    reply = runtime.invoke(route.function, event)
    assert reply["statusCode"] < 500, (route.route_key, path, body, query, reply)
