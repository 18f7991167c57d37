"""Usage and budgets through the real handlers: every turn's usage lands in its caller's
counters by day and month, exactly; owners see every member's and set budgets; a turn at
its budget is refused before the model with 429 and ``Retry-After`` until the period
resets; background jobs' model calls are counted per project."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recall.domain import clock
from recall.domain.jobs import ExtractJob
from recall.domain.prompt import ModelError, ModelReply, ModelRequest, Usage
from recall.services.extraction import ExtractionService, ModelExtractor
from recall.services.usage import JobSpend
from recall.settings import get_settings
from recall.store.dynamodb import dynamodb_client
from recall.wiring import (
    chat_service,
    conversation_store,
    memory_store,
    memory_upkeep,
    message_store,
    model_choice,
    project_store,
    stream_links,
    usage_store,
)
from tests.integration.conftest import Api, transactions_after_every_racer_read
from tests.integration.test_chat_over_websocket import RecordingLinks, Socket

MakeProject = Callable[..., str]
TOKENS = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
COUNTED = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


class Clock:
    """``clock.now`` as the test sets it."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def time_at(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moment = Clock(datetime(2026, 11, 29, 9, 0, tzinfo=UTC))
    monkeypatch.setattr(clock, "now", moment)
    return moment


class CountingModel:
    """Replies with usage that differs turn by turn, cached tokens included."""

    def __init__(self) -> None:
        self.calls = 0

    def converse(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        n = self.calls
        return ModelReply(
            text=f"Reply {n}.",
            usage=Usage(
                input_tokens=100 + n,
                output_tokens=10 + n % 7,
                cache_read_input_tokens=(n % 3) * 50,
                cache_write_input_tokens=(n % 2) * 20,
            ),
            stop_reason="end_turn",
        )


@pytest.fixture
def model() -> Iterator[CountingModel]:
    counting = CountingModel()
    model_choice().use(counting)
    yield counting
    model_choice().use(None)


def chat(api: Api, project: str, text: str, thread: str | None = None) -> Any:
    body: dict[str, Any] = {"message": text}
    if thread:
        body["conversationId"] = thread
    return api.post(f"/projects/{project}/chat", body)


def usage(api: Api, project: str, period: str = "day", date: str | None = None) -> Any:
    query = f"period={period}" + (f"&date={date}" if date else "")
    reply = api.get(f"/projects/{project}/usage", query=query)
    assert reply.status == 200, reply
    return reply.body


def total(replies: list[dict[str, Any]]) -> dict[str, int]:
    return {
        counted: sum(reply["usage"][sent] for reply in replies)
        for sent, counted in zip(TOKENS, COUNTED, strict=True)
    }


def test_counters_equal_the_sum_of_fifty_turns_over_two_days(
    alice: Api, make_project: MakeProject, time_at: Clock, model: CountingModel
) -> None:
    # Given two threads, 25 turns on one day and 25 on the next
    project = make_project(alice)
    days: dict[str, list[dict[str, Any]]] = {"2026-11-29": [], "2026-11-30": []}
    threads: list[str | None] = [None, None]
    for n in range(50):
        day = "2026-11-29" if n < 25 else "2026-11-30"
        time_at.at = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=8, minutes=n)
        reply = chat(alice, project, f"Turn {n}", threads[n % 2])
        assert reply.status == 200, reply
        threads[n % 2] = reply.body["conversation"]["id"]
        days[day].append(reply.body)
    # When / Then each day holds its own turns, and the month all fifty
    for day, replies in days.items():
        counted = usage(alice, project, "day", day)["usage"]
        assert {name: counted[name] for name in COUNTED} == total(replies)
        assert counted["turns"] == 25
        assert counted["totalTokens"] == sum(total(replies).values())
    month = usage(alice, project, "month")
    everything = days["2026-11-29"] + days["2026-11-30"]
    assert {name: month["usage"][name] for name in COUNTED} == total(everything)
    assert month["usage"]["turns"] == 50
    assert month["date"] == "2026-11"
    # And today's default is the second day
    today = usage(alice, project)
    assert (today["date"], today["usage"]["turns"]) == ("2026-11-30", 25)
    assert today["resetsAt"] == "2026-12-01T00:00:00.000Z"


def test_a_new_month_starts_its_own_counters(
    alice: Api, make_project: MakeProject, time_at: Clock, model: CountingModel
) -> None:
    project = make_project(alice)
    time_at.at = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    first = [chat(alice, project, f"November {n}").body for n in range(2)]
    time_at.at = datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    december = chat(alice, project, "December").body
    assert usage(alice, project, "month", "2026-11")["usage"]["turns"] == 2
    assert usage(alice, project, "day", "2026-11-30")["usage"]["turns"] == 2
    assert {k: usage(alice, project, "month")["usage"][k] for k in COUNTED} == total([december])
    assert {k: usage(alice, project, "month", "2026-11")["usage"][k] for k in COUNTED} == total(
        first
    )


def set_budget(owner: Api, project: str, member: Api, **limits: int | None) -> Any:
    return owner.put(f"/projects/{project}/members/{member.sub}/budget", limits)


def test_a_turn_at_its_daily_turn_budget_is_refused_with_retry_after_until_midnight(
    alice: Api, bob: Api, make_project: MakeProject, time_at: Clock, model: CountingModel
) -> None:
    project = make_project(alice, {bob: "editor"})
    assert set_budget(alice, project, bob, turnsPerDay=3).status == 200
    time_at.at = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    assert [chat(bob, project, f"Hello {n}").status for n in range(3)] == [200, 200, 200]
    calls = model.calls
    refused = chat(bob, project, "One more")
    assert refused.status == 429
    assert refused.body["error"]["code"] == "budget_exceeded"
    assert refused.headers["Retry-After"] == str(3600)
    [detail] = refused.body["error"]["details"]
    assert (detail["limit"], detail["used"], detail["budget"]) == ("turnsPerDay", 3, 3)
    assert detail["resetsAt"] == "2026-11-30T00:00:00.000Z"
    assert refused.body["error"]["message"].endswith(f"it resets at {detail['resetsAt']}.")
    # Refused before the model, and no thread was started for it
    assert model.calls == calls
    listed = bob.get(f"/projects/{project}/conversations").body["conversations"]
    assert len(listed) == 3
    # Memory routes keep working, and the next day the turns come back
    put = bob.put(
        f"/projects/{project}/memories/header_dark",
        {"value": "Keep it dark", "category": "preferences"},
    )
    assert put.status in (200, 201), put
    time_at.at = datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC)
    assert chat(bob, project, "A new day").status == 200
    # Alice has no budget: unaffected
    assert chat(alice, project, "Owner turn").status == 200


def test_a_token_budget_refuses_at_exactly_the_limit_and_allows_one_below(
    alice: Api, bob: Api, make_project: MakeProject, time_at: Clock, model: CountingModel
) -> None:
    project = make_project(alice, {bob: "editor"})
    first = chat(bob, project, "Hello").body
    spent = sum(first["usage"][name] for name in TOKENS)
    # One below what was spent: the next turn is refused (used >= limit) ...
    assert set_budget(alice, project, bob, tokensPerMonth=spent).status == 200
    refused = chat(bob, project, "Again")
    assert refused.status == 429
    assert refused.body["error"]["details"][0]["limit"] == "tokensPerMonth"
    assert int(refused.headers["Retry-After"]) == int(
        (datetime(2026, 12, 1, tzinfo=UTC) - time_at.at).total_seconds()
    )
    # ... one token more than spent lets exactly one more turn through
    assert set_budget(alice, project, bob, tokensPerMonth=spent + 1).status == 200
    assert chat(bob, project, "Again").status == 200
    assert chat(bob, project, "And again").status == 429
    remaining = usage(bob, project, "month")["remaining"]
    assert remaining == {"tokens": 0, "turns": None}


def test_owners_see_every_members_usage_and_others_only_their_own(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject, model: CountingModel
) -> None:
    project = make_project(alice, {bob: "editor", carol: "viewer"})
    other = make_project(bob)
    chat(bob, project, "In the shared project")
    chat(bob, other, "In my own project")
    chat(bob, other, "Twice")
    set_budget(alice, project, bob, turnsPerDay=40)
    owner_view = usage(alice, project)
    members = {member["userId"]: member for member in owner_view["members"]}
    assert set(members) == {alice.sub, bob.sub, carol.sub}
    assert members[bob.sub]["usage"]["turns"] == 1
    assert members[bob.sub]["budget"] == {
        "tokensPerDay": None,
        "tokensPerMonth": None,
        "turnsPerDay": 40,
        "turnsPerMonth": None,
    }
    assert members[alice.sub]["usage"]["turns"] == 0
    mine = usage(bob, project)
    assert "members" not in mine or mine["members"] is None
    assert mine["usage"]["turns"] == 1
    assert mine["remaining"] == {"tokens": None, "turns": 39}
    assert usage(bob, other)["usage"]["turns"] == 2
    assert usage(carol, project)["usage"]["turns"] == 0
    stranger = usage_status(Api("nobody-here"), project)
    assert stranger == 403


def test_a_member_who_is_not_an_owner_reads_no_other_members(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    # Given bob, an editor of alice's project
    project = make_project(alice, {bob: "editor"})
    projects_table = get_settings().projects_table
    queried: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        queried.append(params["TableName"])

    events = dynamodb_client().meta.events
    events.register("provide-client-params.dynamodb.Query", record, unique_id="usage-queries")
    # When he reads his usage
    try:
        mine = usage(bob, project)
    finally:
        events.unregister("provide-client-params.dynamodb.Query", unique_id="usage-queries")
    # Then he gets his own, and the project's members were never queried for it
    assert mine["usage"]["turns"] == 0
    assert projects_table not in queried, queried


def usage_status(api: Api, project: str) -> int:
    return api.get(f"/projects/{project}/usage").status


def test_only_an_owner_sets_a_budget_and_bad_ones_are_422(
    alice: Api, bob: Api, carol: Api, make_project: MakeProject
) -> None:
    project = make_project(alice, {bob: "editor"})
    assert set_budget(bob, project, bob, turnsPerDay=1000).status == 403
    assert set_budget(alice, project, carol, turnsPerDay=5).status == 404
    for bad in ({"turnsPerDay": 0}, {"turnsPerDay": "5"}, {"turnsPerDay": True}, {"x": 1}):
        reply = alice.put(f"/projects/{project}/members/{bob.sub}/budget", bad)
        assert reply.status == 422, (bad, reply)
    too_many = alice.put(f"/projects/{project}/members/{bob.sub}/budget", {"tokensPerDay": 10**13})
    assert too_many.status == 422
    for period, date in (
        ("day", "2026-13-45"),
        ("day", "9999-12-31"),
        ("month", "9999-12"),
        ("month", "2026-11-30"),
        ("day", "%D9%A2%D9%A0%D9%A2%D9%A6-11-30"),
    ):
        bad_date = alice.get(f"/projects/{project}/usage", query=f"period={period}&date={date}")
        assert bad_date.status == 422, (period, date, bad_date)
    bad_period = alice.get(f"/projects/{project}/usage", query="period=week")
    assert bad_period.status == 422


def test_a_budget_survives_a_role_change_and_clears_with_an_empty_body(
    alice: Api, bob: Api, make_project: MakeProject
) -> None:
    project = make_project(alice, {bob: "editor"})
    assert set_budget(alice, project, bob, turnsPerMonth=9).status == 200
    changed = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"})
    again = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "viewer"})
    members = alice.get(f"/projects/{project}/members").body["members"]
    [shown] = [member for member in members if member["userId"] == bob.sub]
    assert shown["role"] == "viewer"
    assert shown["budget"]["turnsPerMonth"] == 9
    # and each answer is the member as stored: the budget kept, and when they were added
    assert (changed.status, again.status) == (200, 200)
    assert changed.body == again.body == shown
    cleared = set_budget(alice, project, bob)
    assert cleared.status == 200
    assert cleared.body["budget"] is None


def test_erasing_my_data_takes_my_usage_with_it(
    alice: Api, bob: Api, make_project: MakeProject, model: CountingModel
) -> None:
    project = make_project(alice, {bob: "editor"})
    chat(bob, project, "Hello")
    chat(alice, project, "Hello")
    assert bob.delete(f"/projects/{project}/me").status == 204
    assert usage(alice, project)["usage"]["turns"] == 1
    back = alice.put(f"/projects/{project}/members/{bob.sub}", {"role": "editor"})
    assert back.status == 201
    assert usage(bob, project)["usage"]["turns"] == 0


def test_two_turns_racing_into_a_new_day_are_both_counted(
    alice: Api,
    make_project: MakeProject,
    time_at: Clock,
    model: CountingModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a day already counted, and two threads
    project = make_project(alice)
    yesterday = [chat(alice, project, f"Yesterday {n}").body for n in range(2)]
    threads = [reply["conversation"]["id"] for reply in yesterday]
    time_at.at += timedelta(days=1)
    # When both threads' first turns of the new day read the old day, then save in turn
    # (two Lambda instances: the service, not the one-at-a-time local handler)
    transactions_after_every_racer_read(monkeypatch, 2)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(
            pool.map(
                lambda thread: chat_service().turn(str(alice.sub), project, "Today", thread, None),
                threads,
            )
        )
    monkeypatch.undo()
    monkeypatch.setattr(clock, "now", time_at)
    # Then the finished day keeps its own counts, and the new day has both turns
    assert usage(alice, project, "day", "2026-11-29")["usage"]["turns"] == 2
    today = usage(alice, project)["usage"]
    assert today["turns"] == 2
    assert today["inputTokens"] == sum(outcome.usage.input_tokens for outcome in outcomes)
    assert usage(alice, project, "month")["usage"]["turns"] == 4


def test_an_earlier_period_says_what_was_spent_and_a_later_one_is_422(
    alice: Api, bob: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given bob's budget of three turns a day, and one turn of his on 2026-11-29
    project = make_project(alice, {bob: "editor"})
    assert set_budget(alice, project, bob, turnsPerDay=3).status == 200
    chat(bob, project, "Hello")
    # When the next day asks for that day, for itself by its date, and for days to come
    time_at.at += timedelta(days=1)
    earlier = usage(bob, project, "day", "2026-11-29")
    today = usage(bob, project, "day", "2026-11-30")
    # Then the earlier day is what was spent, with no reset or remaining: it is over
    assert earlier["usage"]["turns"] == 1
    assert (earlier["resetsAt"], earlier["remaining"]) == (None, None)
    assert today["resetsAt"] == "2026-12-01T00:00:00.000Z"
    assert today["remaining"] == {"turns": 3, "tokens": None}
    assert usage(bob, project, "month", "2026-11")["remaining"]["turns"] is None
    for period, date in (("day", "2026-12-01"), ("month", "2026-12")):
        later = bob.get(f"/projects/{project}/usage", query=f"period={period}&date={date}")
        assert later.status == 422, (period, later)
        assert later.body["error"]["details"][0]["field"] == "date"


def test_background_jobs_model_calls_are_counted_per_project(
    alice: Api, bob: Api, make_project: MakeProject, time_at: Clock
) -> None:
    # Given a thread to extract from, in one project of two
    project = make_project(alice, {bob: "editor"})
    other = make_project(alice)
    thread = chat(bob, project, "Always keep the header dark").body["conversation"]["id"]
    for n in range(3):
        chat(bob, project, f"And the footer light, number {n}", thread)
    scripted = CountingModel()
    extractor = ModelExtractor(
        scripted,
        "extraction-model",
        512,
        500,
        transcript_max_chars=100_000,
        message_max_chars=8_000,
    )
    service = ExtractionService(
        get_settings(),
        conversation_store(),
        message_store(),
        memory_store(),
        memory_upkeep(),
        extractor,
        project_store(),
        JobSpend(usage_store()),
    )
    # When extraction runs with a model
    report = service.run(
        ExtractJob(user_id=str(bob.sub), project_id=project, conversation_id=thread), clock.now()
    )
    assert report.ran
    # Then the project's upkeep shows the call, for any member, and not the member's usage
    for member in (alice, bob):
        upkeep = usage(member, project)["upkeep"]
        extraction = upkeep["jobs"]["extraction"]
        assert (extraction["calls"], extraction["inputTokens"]) == (1, 101)
        assert extraction["models"] == ["extraction-model"]
        assert upkeep["total"]["calls"] == 1
        assert upkeep["jobs"]["summary"]["calls"] == 0
    assert usage(alice, project, "month")["upkeep"]["total"]["calls"] == 1
    assert usage(alice, other)["upkeep"]["total"]["calls"] == 0
    # and a later day starts at zero, while the month keeps the call
    time_at.at += timedelta(days=1)
    assert usage(alice, project)["upkeep"]["total"]["calls"] == 0
    assert usage(alice, project, "month")["upkeep"]["total"]["calls"] == 1


def test_a_streamed_turn_over_budget_gets_the_http_429_as_an_error_frame(
    alice: Api,
    bob: Api,
    make_project: MakeProject,
    time_at: Clock,
) -> None:
    project = make_project(alice, {bob: "editor"})
    set_budget(alice, project, bob, turnsPerDay=1)
    links = RecordingLinks()
    stream_links().use(links)
    try:
        assert Socket(bob, links).chat(project, "first")[-1]["type"] == "done"
        frames = Socket(bob, links).chat(project, "second", requestId="r-9")
    finally:
        stream_links().use(None)
    http = bob.post(f"/projects/{project}/chat", {"message": "second"})
    assert http.status == 429
    retry_after = int(http.headers["Retry-After"])
    assert frames == [
        {
            "type": "error",
            "requestId": "r-9",
            "status": 429,
            "body": http.body,
            "retryAfter": retry_after,
        }
    ]
    assert http.body["error"]["code"] == "budget_exceeded"
    assert "budget of 1 turn today" in http.body["error"]["message"]


class FailingModel:
    def converse(self, request: ModelRequest) -> ModelReply:
        raise ModelError("Bedrock failed (InternalServerException)")


def test_a_failed_reply_is_not_counted_as_a_turn(
    alice: Api, make_project: MakeProject, model: CountingModel
) -> None:
    project = make_project(alice)
    assert chat(alice, project, "Hello").status == 200
    model_choice().use(FailingModel())  # type: ignore[arg-type]
    assert chat(alice, project, "Again").status == 502
    model_choice().use(model)  # type: ignore[arg-type]
    counted = usage(alice, project)["usage"]
    assert counted["turns"] == 1
    assert counted["models"] == [get_settings().default_model_id]


def test_a_refused_turn_is_not_kept_under_its_idempotency_key(
    alice: Api, bob: Api, make_project: MakeProject, model: CountingModel
) -> None:
    project = make_project(alice, {bob: "editor"})
    set_budget(alice, project, bob, turnsPerDay=1)
    assert chat(bob, project, "first").status == 200
    key = {"Idempotency-Key": "retry-after-budget"}
    body = {"message": "second"}
    assert bob.post(f"/projects/{project}/chat", body, headers=key).status == 429
    set_budget(alice, project, bob, turnsPerDay=2)
    assert bob.post(f"/projects/{project}/chat", body, headers=key).status == 200
