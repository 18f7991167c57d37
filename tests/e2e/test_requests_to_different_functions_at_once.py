"""Requests to different functions at the same moment each act as their own caller with
their own body. In Lambda each function runs in its own process; ``make dev`` runs them all
in one, where Powertools keeps the current event on a class every resolver shares, so two
functions invoked at once must not see each other's event."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
import time
from typing import Any
import uuid

import pytest

from local import runtime
from tests.e2e.conftest import Caller

pytestmark = pytest.mark.e2e

ROUNDS = 60
# How long each handler waits before it reads who calls: long enough that the other
# function's request arrives meanwhile (the server runs in this process).
WAIT_SECONDS = 0.002


@pytest.fixture
def handlers_that_take_a_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    for function in ("ProjectsFunction", "MemoriesFunction"):
        module = runtime.handler_module(function)
        read = module.caller_id

        def slow(app: Any, read: Callable[[Any], str] = read) -> str:
            time.sleep(WAIT_SECONDS)
            return read(app)

        monkeypatch.setattr(module, "caller_id", slow)


@pytest.mark.usefixtures("handlers_that_take_a_moment")
def test_two_users_calling_two_functions_at_once_each_get_their_own_answer(
    caller: Callable[[str | None], Caller],
) -> None:
    # Given two users, each with a project of their own
    alice, bob = (caller(f"{name}-{uuid.uuid4().hex[:10]}") for name in ("alice", "bob"))
    alices = alice.post("/projects", {"name": "Alice's shop"}).body["id"]
    bobs = bob.post("/projects", {"name": "Bob's bakery"}).body["id"]

    def list_projects() -> set[tuple[int, str]]:
        # The projects function: Alice's list, which never names Bob's project
        seen = set()
        for _ in range(ROUNDS):
            answer = alice.get("/projects")
            seen.add((answer.status, ",".join(p["id"] for p in answer.body["projects"])))
        return seen

    def save_memory() -> set[tuple[int, str]]:
        # The memories function: Bob writes an entry to his project, a new value each time
        seen = set()
        for n in range(ROUNDS):
            value = f"Note {n}"
            answer = bob.put(
                f"/projects/{bobs}/memories/note", {"value": value, "category": "brand"}
            )
            right = answer.status in (200, 201) and answer.body["value"] == value
            seen.add((200 if right else answer.status, "" if right else str(answer.body)))
        return seen

    # When both call at once, again and again
    with ThreadPoolExecutor(2) as pool:
        listed, saved = pool.submit(list_projects), pool.submit(save_memory)
        lists, saves = listed.result(), saved.result()

    # Then Alice always sees exactly her project, and every one of Bob's writes landed
    assert lists == {(200, alices)}
    assert saves == {(200, "")}
