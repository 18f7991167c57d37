"""A member's sessions in a project, through the real handlers and the prune-sessions job:
a turn after the idle time starts one (written once) and ends the one before; the job ends
an idle one and gives extraction its turn for what was said in it; the list shows the live
one first, then ended ones, newest first, to its member only."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
import json
from typing import Any

from botocore.exceptions import ClientError
import pytest

from local import embedded
from recall.domain import clock
from recall.domain.jobs import ScheduledJob
from recall.domain.sessions import session_step
from recall.domain.usage import Counts
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.wiring import chat_service, maintenance, memory_store, usage_store
from tests.integration.conftest import Api, transactions_after_every_racer_read
from tests.integration.queued_jobs import take_queued

MakeProject = Callable[..., str]
MINUTE = timedelta(minutes=1)


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def time_at(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Clock:
    """``clock.now`` as the test sets it, on a day of its own (the prune job reads every
    session due in its hours, so tests on one day would end each other's)."""
    day = 1 + sum(map(ord, request.node.name)) % 27
    moment = Clock(datetime(2031, 3, day, 9, 0, tzinfo=UTC))
    monkeypatch.setattr(clock, "now", moment)
    return moment


def idle() -> timedelta:
    return timedelta(seconds=get_settings().session_idle_seconds)


def grace() -> timedelta:
    return timedelta(seconds=get_settings().session_end_grace_seconds)


def say(api: Api, project: str, text: str, thread: str | None = None) -> str:
    body = {"message": text, **({"conversationId": thread} if thread else {})}
    reply = api.post(f"/projects/{project}/chat", body)
    assert reply.status == 200, reply
    conversation_id: str = reply.body["conversation"]["id"]
    return conversation_id


def sessions(api: Api, project: str, query: str = "") -> list[dict[str, Any]]:
    reply = api.get(f"/projects/{project}/sessions", query=query)
    assert reply.status == 200, reply
    listed: list[dict[str, Any]] = reply.body["sessions"]
    return listed


def prune(at: datetime) -> tuple[int, int]:
    report = maintenance().run(ScheduledJob.PRUNE_SESSIONS, at)
    return report.read, report.changed


def sessions_counted(api: Api, project: str) -> int:
    return memory_store().meta(api.sub or "", project).sessions_since_consolidation


def test_a_turn_after_the_idle_time_starts_a_session_and_ends_the_one_before(
    alice: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given two turns an hour apart, in two threads: one session
    project = make_project(alice)
    first = time_at.at
    thread = say(alice, project, "hello")
    time_at.at = first + timedelta(hours=1)
    say(alice, project, "another thread")
    (live,) = sessions(alice, project)
    assert live["live"] and live["endedAt"] is None
    assert (live["startedAt"], live["lastTurnAt"], live["turns"]) == (
        clock.stamp(first),
        clock.stamp(time_at.at),
        2,
    )
    assert live["tokens"] > 0
    # When the next turn comes after the idle time
    last = time_at.at
    time_at.at = last + idle()
    say(alice, project, "back", thread)
    # Then it starts a session, and the one before ended its idle time after its last turn
    newest, ended = sessions(alice, project)
    assert (newest["live"], newest["startedAt"], newest["turns"]) == (
        True,
        clock.stamp(time_at.at),
        1,
    )
    assert ended == {**live, "live": False, "endedAt": clock.stamp(last + idle())}
    # and each start counted once toward consolidation
    assert sessions_counted(alice, project) == 2


def test_the_prune_job_ends_an_idle_session_and_queues_extraction_for_its_signals(
    alice: Api,
    make_project: MakeProject,
    time_at: Clock,
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given a session with a thread holding a rule no extraction read (too short for the
    # turn to queue one) and, an hour later, a thread of small talk
    project = make_project(alice)
    started = time_at.at
    rules = say(alice, project, "Always use metric units in product pages")
    time_at.at += timedelta(hours=1)
    say(alice, project, "What a nice day")
    last = time_at.at
    take_queued(embedded_store, alice.sub or "")
    # When the job runs once the session's first due time has passed (its start, the idle
    # time and the grace), but not yet the last turn's
    prune(started + idle() + grace())
    # Then the session is still live, due again when it can end
    assert sessions(alice, project)[0]["live"]
    assert take_queued(embedded_store, alice.sub or "") == []
    # When it runs once they have
    read, changed = prune(last + idle() + grace())
    # Then the session is ended with its turns, and extraction queued for the rule's thread
    (ended,) = sessions(alice, project)
    assert (ended["live"], ended["startedAt"], ended["turns"]) == (
        False,
        clock.stamp(started),
        2,
    )
    assert ended["endedAt"] == clock.stamp(last + idle())
    assert (read, changed) >= (1, 1)
    queued = [json.loads(body) for body in take_queued(embedded_store, alice.sub or "")]
    assert [(job["kind"], job["conversationId"]) for job in queued] == [("extract", rules)]
    # and running it again changes nothing
    prune(last + idle() + grace())
    assert sessions(alice, project) == [ended]
    assert take_queued(embedded_store, alice.sub or "") == []


def test_a_session_the_job_ended_stays_as_it_was_when_the_next_turn_starts_one(
    alice: Api,
    make_project: MakeProject,
    time_at: Clock,
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given a session with a rule no extraction read, which the job ended
    project = make_project(alice)
    say(alice, project, "Never use stock photos")
    prune(time_at.at + idle() + grace())
    (ended,) = sessions(alice, project)
    assert len(take_queued(embedded_store, alice.sub or "")) == 1
    # When the member comes back after that
    time_at.at += idle() + grace() + MINUTE
    say(alice, project, "back again")
    # Then a new session starts, the ended one is untouched, and the job has nothing of it
    # left to give extraction
    newest, older = sessions(alice, project)
    assert (newest["live"], newest["turns"]) == (True, 1)
    assert older == ended
    prune(time_at.at + MINUTE)
    assert take_queued(embedded_store, alice.sub or "") == []


def test_a_turn_that_ends_a_session_leaves_it_due_so_the_job_gives_extraction_its_turn(
    alice: Api,
    make_project: MakeProject,
    time_at: Clock,
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given a session with a rule no extraction read, ended by the next turn after the idle
    # time but before the job could end it
    project = make_project(alice)
    rules = say(alice, project, "Never use stock photos")
    time_at.at += idle() + MINUTE
    say(alice, project, "back")
    take_queued(embedded_store, alice.sub or "")
    # When the job runs
    prune(time_at.at + MINUTE)
    # Then it queues extraction for the ended session's thread, once
    queued = [json.loads(body) for body in take_queued(embedded_store, alice.sub or "")]
    assert [job["conversationId"] for job in queued] == [rules]
    prune(time_at.at + 2 * MINUTE)
    assert take_queued(embedded_store, alice.sub or "") == []
    assert [s["live"] for s in sessions(alice, project)] == [True, False]


def test_a_session_goes_on_across_the_end_of_a_month(
    alice: Api, make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    moment = Clock(datetime(2031, 5, 31, 23, 30, tzinfo=UTC))
    monkeypatch.setattr(clock, "now", moment)
    project = make_project(alice)
    say(alice, project, "late in May")
    moment.at = datetime(2031, 6, 1, 0, 30, tzinfo=UTC)
    say(alice, project, "early in June")
    say(alice, project, "and again")
    (live,) = sessions(alice, project)
    assert (live["startedAt"], live["turns"]) == ("2031-05-31T23:30:00.000Z", 3)
    assert sessions_counted(alice, project) == 1


def test_a_turn_that_starts_a_session_over_a_tally_that_moved_meanwhile_is_refused(
    alice: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given a member's session as a turn a day later reads it
    project = make_project(alice)
    user = alice.sub or ""
    say(alice, project, "hello")
    usage = usage_store()
    read = usage.get(user, project, time_at.at)
    # When another turn of that day goes on with the session before that turn saves
    time_at.at += timedelta(hours=1)
    say(alice, project, "still here")
    # Then the later turn's save, which would start a session over what it read, is refused
    later = time_at.at - timedelta(hours=1) + idle() + MINUTE
    step = session_step(read.session, False, later, 1, 1, idle())
    assert step.started
    writes = usage.turn_writes(user, project, read, Counts(turns=1), later, step)
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        dynamodb_client().transact_write_items(TransactItems=writes)  # type: ignore[arg-type]


def test_two_turns_that_would_each_start_a_session_start_one(
    alice: Api, make_project: MakeProject, time_at: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a member's first two turns, read at once before either saved (two Lambda
    # instances: the service, not the one-at-a-time local handler)
    project = make_project(alice)
    transactions_after_every_racer_read(monkeypatch, 2)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(
            pool.map(
                lambda text: chat_service().turn(alice.sub or "", project, text, None, None),
                ["one", "two"],
            )
        )
    monkeypatch.undo()
    monkeypatch.setattr(clock, "now", time_at)
    # Then both landed in one session
    assert len({outcome.conversation.conversation_id for outcome in outcomes}) == 2
    (live,) = sessions(alice, project)
    assert live["turns"] == 2
    assert sessions_counted(alice, project) == 1


def test_sessions_are_their_members_own_in_each_project(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given alice and bob in two projects, each with turns at their own times
    one, two = make_project(alice, {bob: "editor"}), make_project(alice, {bob: "editor"})
    starts = {}
    for n, (api, project) in enumerate([(alice, one), (alice, two), (bob, one), (bob, two)]):
        time_at.at += MINUTE
        say(api, project, f"turn {n}")
        starts[(api.sub, project)] = clock.stamp(time_at.at)
    # Then each sees only their own session in each project
    for api in (alice, bob):
        for project in (one, two):
            assert [s["startedAt"] for s in sessions(api, project)] == [starts[(api.sub, project)]]
    # and someone with no role gets 403
    assert carol.get(f"/projects/{one}/sessions").status == 403


def test_the_list_pages_newest_first_and_refuses_a_cursor_of_another_list(
    alice: Api, bob: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given three sessions
    project = make_project(alice, {bob: "editor"})
    starts = []
    for n in range(3):
        if n:
            time_at.at += idle() + MINUTE
        say(alice, project, f"session {n}")
        starts.append(clock.stamp(time_at.at))
    say(bob, project, "bob's")
    # When alice pages through them one at a time
    seen, cursor = [], None
    for _ in range(4):
        query = "limit=1" + (f"&cursor={cursor}" if cursor else "")
        reply = alice.get(f"/projects/{project}/sessions", query=query)
        assert reply.status == 200, reply
        seen += [s["startedAt"] for s in reply.body["sessions"]]
        cursor = reply.body.get("nextCursor")
        if not cursor:
            break
    # Then newest first, each once
    assert seen == starts[::-1]
    # and her cursor does not page bob's list, nor an edited one anything
    first = alice.get(f"/projects/{project}/sessions", query="limit=1").body["nextCursor"]
    assert bob.get(f"/projects/{project}/sessions", query=f"cursor={first}").status == 422
    assert alice.get(f"/projects/{project}/sessions", query="cursor=abc").status == 422
    assert alice.get(f"/projects/{project}/sessions", query="limit=0").status == 422
