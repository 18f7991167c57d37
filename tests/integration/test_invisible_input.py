"""Input that looks like something but is nothing is refused like blank input: memory keys
made only of dots (an HTTP client normalises ``.`` and ``..`` out of a path, so such an
entry could never be deleted) and values made only of invisible characters (zero-width,
BOM, other format characters, controls, separators)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import Api

FAST = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DOTS = st.integers(1, 64).map(lambda count: "." * count)
INVISIBLE = st.text(
    st.characters(whitelist_categories=("Cf", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=20
)


@FAST
@given(key=DOTS)
@example(key=".")
@example(key="..")
def test_a_key_made_only_of_dots_is_a_422(
    alice: Api, make_project: Callable[..., str], key: str
) -> None:
    # Given an editor's project
    project = make_project(alice)

    # When they write an entry whose key is only dots
    reply = alice.put(
        f"/projects/{project}/memories/{key}", {"value": "Keep it dark", "category": "brand"}
    )

    # Then it is a 422 naming the key, and no entry exists
    assert reply.status == 422, (key, reply)
    assert [d["field"] for d in reply.body["error"]["details"]] == ["key"]
    assert alice.get(f"/projects/{project}/memories").body["memories"] == []


@FAST
@given(value=INVISIBLE)
@example(value="\u200b")
@example(value="\ufeff\u200d\u2060")
def test_a_value_made_only_of_invisible_characters_is_a_422_like_a_blank_one(
    alice: Api, make_project: Callable[..., str], value: str
) -> None:
    # Given an editor's project
    project = make_project(alice)

    # When they write an entry whose value shows nothing
    reply = alice.put(f"/projects/{project}/memories/tone", {"value": value, "category": "brand"})

    # Then it is the 422 a blank value gets
    assert reply.status == 422, (value, reply)
    assert [d["field"] for d in reply.body["error"]["details"]] == ["value"]


@FAST
@given(text=INVISIBLE)
@example(text="\ufeff")
def test_a_name_title_or_message_made_only_of_invisible_characters_is_a_422(
    alice: Api, make_project: Callable[..., str], text: str
) -> None:
    # Given an editor's project
    project = make_project(alice)

    # When a project name, a thread title or a chat message shows nothing
    replies = {
        "name": alice.post("/projects", {"name": text}),
        "title": alice.post(f"/projects/{project}/conversations", {"title": text}),
        "message": alice.post(f"/projects/{project}/chat", {"message": text}),
    }

    # Then each is the 422 a blank one gets, naming its field
    for field, reply in replies.items():
        assert reply.status == 422, (field, text, reply)
        assert [d["field"] for d in reply.body["error"]["details"]] == [field]
