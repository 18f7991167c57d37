"""Every id a client sends (path ids, the memory ``conversationId``, the JWT ``sub``) is
bounded by DynamoDB's key limits before a key is built from it, so an id no key could hold
is a 4xx on AWS, not a 500. The suite's client enforces AWS's key-size limits
(``aws_limits``), which moto does not, so these would fail if a bound went missing.

Order is kept: a stranger still gets 403 first; then an id that cannot name anything is a
404, and a user id an owner would add is a 422."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recall.store import keys, memory_items, project_items
from recall.store.conversation_items import recency
from tests.integration.conftest import Api

FAST = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Letters and digits of one to four UTF-8 bytes: what Powertools' router matches in a path.
PATH_SAFE = st.characters(whitelist_categories=("Lu", "Ll", "Lo", "Nd"), max_codepoint=0x2FFFF)


def _over(limit: int) -> st.SearchStrategy[str]:
    """Text over ``limit`` UTF-8 bytes, of one- to four-byte characters."""
    return st.tuples(
        st.text(PATH_SAFE, min_size=1, max_size=8), st.integers(limit + 1, limit + 3000)
    ).map(lambda parts: parts[0] * (parts[1] // len(parts[0].encode()) + 1))


OVERSIZED_ID = _over(keys.ID_MAX_BYTES)
OVERSIZED_USER = _over(keys.USER_ID_MAX_BYTES)


@FAST
@given(conversation_id=OVERSIZED_ID)
@example(conversation_id="x" * 2_000)
def test_an_oversized_conversation_id_is_a_404_after_the_role_check(
    alice: Api, bob: Api, make_project: Callable[..., str], conversation_id: str
) -> None:
    # Given Alice's project, where Bob has no role
    project = make_project(alice)
    thread = f"/projects/{project}/conversations/{conversation_id}"
    memories = f"/projects/{project}/memories"

    # When each reads or writes through a conversation id no key could hold
    calls = {
        "get": lambda api: api.get(thread),
        "patch": lambda api: api.patch(thread, {"title": "x"}),
        "delete": lambda api: api.delete(thread),
        "context": lambda api: api.get(thread + "/context"),
        "clear": lambda api: api.post(thread + "/clear-context"),
        "chat": lambda api: api.post(
            f"/projects/{project}/chat", {"message": "hi", "conversationId": conversation_id}
        ),
        "memories": lambda api: api.get(memories, query=f"conversationId={conversation_id}"),
        "put memory": lambda api: api.put(
            memories + "/tone",
            {"value": "dark", "category": "brand", "conversationId": conversation_id},
        ),
    }
    for name, call in calls.items():
        # Then Bob gets 403 and Alice a 404
        assert call(bob).status == 403, name
        assert call(alice).status == 404, (name, call(alice))


@FAST
@given(project_id=OVERSIZED_ID)
@example(project_id="p" * 3_000)
def test_an_oversized_project_id_is_the_strangers_403(alice: Api, project_id: str) -> None:
    # Given a caller, and a project id no project could have
    # When they read it, or write under it
    replies = [
        alice.get(f"/projects/{project_id}"),
        alice.get(f"/projects/{project_id}/memories"),
        alice.post(f"/projects/{project_id}/chat", {"message": "hi"}),
    ]

    # Then each is the 403 of a project they have no role on
    assert [reply.status for reply in replies] == [403, 403, 403]
    assert all(reply.body["error"]["code"] == "forbidden" for reply in replies)


@FAST
@given(member=OVERSIZED_USER)
@example(member="m" * 2_000)
def test_a_member_id_no_key_could_hold_is_a_422_to_set_and_a_404_to_remove(
    alice: Api, bob: Api, make_project: Callable[..., str], member: str
) -> None:
    # Given Alice's project, where Bob has no role
    project = make_project(alice)
    path = f"/projects/{project}/members/{member}"

    # When the owner sets or removes a user id no key could hold
    # Then a stranger still gets 403 first, and the owner 422 and 404
    assert bob.put(path, {"role": "viewer"}).status == 403
    added = alice.put(path, {"role": "viewer"})
    assert added.status == 422, added
    assert [d["field"] for d in added.body["error"]["details"]] == ["userId"]
    assert alice.delete(path).status == 404


@FAST
@given(sub=OVERSIZED_USER | st.text(PATH_SAFE, max_size=20).map(lambda text: "user#" + text))
@example(sub="s" * 2_000)
def test_a_sub_no_key_could_hold_is_a_401(as_user: Callable[[str | None], Api], sub: str) -> None:
    # Given a caller whose token's subject no key could hold (over its bytes, or with '#')
    caller = as_user(sub)

    # When they call any route
    replies = [caller.post("/projects", {"name": "Corner Shop"}), caller.get("/projects")]

    # Then it is a 401, and nothing was written under it
    assert [reply.status for reply in replies] == [401, 401]


def test_the_bounds_fit_every_key() -> None:
    # Given the longest user id, project id and conversation id the edge lets through
    user = "u" * keys.USER_ID_MAX_BYTES
    project, thread = "p" * keys.ID_MAX_BYTES, "c" * keys.ID_MAX_BYTES
    history = memory_items.history_prefix("k" * 64, thread) + "0" * 26

    # Then the longest keys built from them fit DynamoDB's limits
    assert len(keys.thread_key(user, project, thread).encode()) <= keys.PARTITION_KEY_MAX_BYTES
    for key in (project_items.member_key, project_items.erasing_key, project_items.former_key):
        assert len(key(project, user)["sk"]["S"].encode()) <= keys.SORT_KEY_MAX_BYTES, key
    assert len(recency(True, "2025-01-31T09:15:02.123Z", thread)) <= keys.SORT_KEY_MAX_BYTES
    assert len(history) <= keys.SORT_KEY_MAX_BYTES
