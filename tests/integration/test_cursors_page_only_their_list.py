"""A list cursor resumes only the list that issued it, at a position inside that list's
query: generated cursors (issued by another list, edited, or made up) get the page after
their position or a 422, never a 500 and never a page from outside the position. The
store's client carries DynamoDB's own refusal of a start key outside the query
(``aws_limits``), so a cursor the product let through unchecked would be a 500 here."""

from __future__ import annotations

import base64
from dataclasses import dataclass
import json
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from tests.integration.conftest import Api, new_user

HYPOTHESIS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass(frozen=True)
class Lists:
    """One caller's lists, each with more than one page, and a cursor each issued."""

    api: Api
    paths: dict[str, tuple[str, str]]  # list name -> (path, query without the cursor)
    issued: dict[str, str]  # list name -> the cursor it issued for its first page


def _decoded(cursor: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    )
    return decoded


def _encoded(values: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.fixture(scope="module")
def lists(embedded_store: Any) -> Lists:
    api = Api(new_user())
    projects = []
    for _ in range(3):
        created = api.post("/projects", {"name": "Corner Shop"})
        assert created.status == 201, created
        projects.append(created.body["id"])
    project = projects[0]
    threads = []
    for _ in range(3):
        turn = api.post(f"/projects/{project}/chat", {"message": "Hello there"})
        assert turn.status == 200, turn
        threads.append(turn.body["conversation"]["id"])
    for thread in threads[1:]:
        archived = api.patch(f"/projects/{project}/conversations/{thread}", {"archived": True})
        assert archived.status == 200, archived
    for _ in range(2):
        turn = api.post(
            f"/projects/{project}/chat", {"message": "More", "conversationId": threads[0]}
        )
        assert turn.status == 200, turn
    base = f"/projects/{project}/conversations"
    paths = {
        "projects": ("/projects", "limit=1"),
        "live": (base, "limit=1"),
        "archived": (base, "archived=true&limit=1"),
        "messages": (f"{base}/{threads[0]}", "limit=2"),
        "other thread": (f"{base}/{threads[1]}", "limit=1"),
    }
    api.post(f"{base}", {"title": "a second live thread"})
    issued = {}
    for name, (path, query) in paths.items():
        reply = api.get(path, query=query)
        assert reply.status == 200 and reply.body["nextCursor"], (name, reply)
        issued[name] = reply.body["nextCursor"]
    return Lists(api, paths, issued)


def _page(lists: Lists, name: str, cursor: str) -> Any:
    path, query = lists.paths[name]
    return lists.api.get(path, query=f"{query}&cursor={quote(cursor, safe='')}")


def test_every_issued_cursor_pages_its_own_list(lists: Lists) -> None:
    for name, cursor in lists.issued.items():
        assert _page(lists, name, cursor).status == 200, name


@pytest.mark.parametrize("issuer", ["projects", "live", "archived", "messages", "other thread"])
def test_a_cursor_issued_by_another_list_is_a_422(lists: Lists, issuer: str) -> None:
    for name in lists.paths:
        if name != issuer:
            reply = _page(lists, name, lists.issued[issuer])
            assert reply.status == 422, (issuer, name, reply)
            assert reply.body["error"]["details"][0]["field"] == "cursor"


TEXT = st.one_of(
    st.text(max_size=40),
    st.text(
        alphabet=st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
        min_size=200,
        max_size=400,
    ),
    st.sampled_from(["", "#", "L#", "A#", "D#", "\ud800", "0" * 26, "Z" * 26, "x" * 1_100]),
)
VALUES = st.one_of(TEXT, st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2))


@st.composite
def edited(draw: st.DrawFn, lists: Lists) -> tuple[str, str]:
    """A list and a cursor it issued with its values edited, or its fields changed."""
    name = draw(st.sampled_from(sorted(lists.paths)))
    values = _decoded(lists.issued[name])
    how = draw(st.sampled_from(["edit a value", "suffix a value", "drop a field", "add a field"]))
    field = draw(st.sampled_from(sorted(values)))
    if how == "edit a value":
        values[field] = draw(VALUES)
    elif how == "suffix a value":
        values[field] = str(values[field]) + draw(TEXT)
    elif how == "drop a field":
        del values[field]
    else:
        values[draw(st.text(max_size=12))] = draw(VALUES)
    return name, _encoded(values)


@HYPOTHESIS
@given(data=st.data())
def test_an_edited_cursor_pages_from_inside_its_list_or_is_a_422(
    lists: Lists, data: st.DataObject
) -> None:
    name, cursor = data.draw(edited(lists))
    reply = _page(lists, name, cursor)
    assert reply.status in (200, 422), (name, cursor, reply)
    if reply.status == 422:
        assert reply.body["error"]["details"][0]["field"] == "cursor"
        return
    _assert_after(name, _decoded(cursor), reply.body)


def _assert_after(name: str, start: dict[str, Any], body: dict[str, Any]) -> None:
    """A page a cursor gets lies wholly past the cursor's position."""
    if name == "projects":
        assert all(row["id"] > start["projectId"] for row in body["projects"])
    elif name in ("messages", "other thread"):
        assert all(row["id"] < start["messageId"] for row in body["messages"])
    else:
        assert all(row["id"] != start["conversationId"] for row in body["conversations"])


@HYPOTHESIS
@given(
    name=st.sampled_from(["projects", "live", "archived", "messages", "other thread"]),
    cursor=st.one_of(
        st.text(max_size=60),
        st.binary(max_size=60).map(lambda raw: base64.urlsafe_b64encode(raw).decode()),
        st.dictionaries(st.text(max_size=15), VALUES, max_size=3).map(_encoded),
    ),
)
def test_a_made_up_cursor_is_a_422_or_a_page_never_a_500(
    lists: Lists, name: str, cursor: str
) -> None:
    reply = _page(lists, name, cursor)
    assert reply.status in (200, 422), (name, cursor, reply)
