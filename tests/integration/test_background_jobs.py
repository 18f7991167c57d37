"""Background jobs over the embedded DynamoDB, each gate at its boundary with the clock
passed in: extraction, rolling summaries, consolidation, session pruning and expiry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
import threading
from typing import Any
import uuid

from botocore.exceptions import ClientError
import pytest

from recall.domain import clock
from recall.domain.conversations import Conversation
from recall.domain.ids import new_id
from recall.domain.jobs import AnyJob, ConsolidateJob, ExtractJob, ScheduledJob, SummarizeJob
from recall.domain.memory import Action, Category, MemoryEntry, Scope, Source
from recall.domain.messages import Message, MessageRole
from recall.domain.prompt import ModelReply, ModelRequest, ModelThrottled
from recall.errors import Throttled, Unavailable
from recall.services.access import ProjectAccess
from recall.services.consolidation import ConsolidationService
from recall.services.extraction import ExtractionService, MemoryExtractor, RuleExtractor
from recall.services.maintenance import Maintenance
from recall.services.sessions import SessionService
from recall.services.summaries import (
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryService,
)
from recall.settings import Settings, get_settings
from recall.store.conversation_items import conversation_key
from recall.store.conversations import ConversationStore
from recall.store.dynamodb import dynamodb_client, to_value
from recall.store.memories import MemoryStore
from recall.store.memory_upkeep import MemoryUpkeep
from recall.store.messages import MessageStore
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore
from recall.store.usage import UsageStore
from tests.integration.fault_injection import ALWAYS, THROTTLES, injected, no_backoff_sleep

NOW = datetime.fromisoformat("2025-06-02T12:00:00+00:00")
SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


class Queued:
    """The jobs queue as a list, for the jobs that fan work out."""

    def __init__(self) -> None:
        self.jobs: list[AnyJob] = []

    def send(self, jobs: list[AnyJob]) -> int:
        self.jobs.extend(jobs)
        return len(jobs)


class Recall:
    """The stores and job services of one user and project, with the settings given (and
    the model extraction asks, the offline classifier unless told)."""

    def __init__(
        self,
        extractor: MemoryExtractor | None = None,
        summarizer: Summarizer | None = None,
        **overrides: Any,
    ) -> None:
        # Two hours of due buckets back are enough for a clock that jumps exactly
        self.settings: Settings = get_settings().model_copy(
            update={"maintenance_lookback_hours": 2, **overrides}
        )
        settings = self.settings
        self.user = f"user-{uuid.uuid4().hex[:12]}"
        self.project = new_id()
        self.conversations = ConversationStore(settings)
        self.messages = MessageStore(settings)
        self.memories = MemoryStore(settings)
        self.upkeep = MemoryUpkeep(settings)
        self.queue = Queued()
        self.extraction = ExtractionService(
            settings,
            self.conversations,
            self.messages,
            self.memories,
            self.upkeep,
            extractor or RuleExtractor(),
        )
        self.summaries = SummaryService(
            settings,
            self.conversations,
            self.messages,
            summarizer
            or ExtractiveSummarizer(settings.summary_max_chars, settings.summary_point_max_chars),
            self.queue,  # type: ignore[arg-type]
        )
        self.consolidation = ConsolidationService(
            settings,
            self.memories,
            self.upkeep,
            self.queue,  # type: ignore[arg-type]
        )
        self.maintenance = Maintenance(
            SessionService(
                settings,
                ProjectAccess(ProjectStore(settings)),
                SessionStore(settings),
                UsageStore(settings),
                self.conversations,
                self.queue,  # type: ignore[arg-type]
            ),
            self.memories,
            self.upkeep,
            self.consolidation,
        )

    def thread(self, texts: list[str], at: datetime = NOW) -> Conversation:
        """A thread whose messages alternate user and assistant, counted on the thread."""
        stamp = clock.stamp(at)
        conversation = Conversation(
            user_id=self.user,
            project_id=self.project,
            conversation_id=new_id(),
            title="t",
            created_at=stamp,
            updated_at=stamp,
        )
        self.conversations.create(conversation)
        self.add(conversation, texts, at)
        return conversation

    def add(
        self,
        conversation: Conversation,
        texts: list[str],
        at: datetime = NOW,
        role: MessageRole | None = None,
    ) -> None:
        """Messages alternating user and assistant, or all of ``role``."""
        messages = [
            Message(
                message_id=new_id(),
                role=role or ("user" if n % 2 == 0 else "assistant"),
                content=text,
                created_at=clock.stamp(at),
            )
            for n, text in enumerate(texts)
        ]
        ids = (self.user, self.project, conversation.conversation_id)
        self.messages.add(*ids, messages)
        self.conversations.count_added_messages(*ids, len(messages))

    def extract(self, conversation: Conversation, at: datetime = NOW) -> Any:
        job = ExtractJob(
            user_id=self.user,
            project_id=self.project,
            conversation_id=conversation.conversation_id,
        )
        return self.extraction.run(job, at)

    def entries(self, at: datetime = NOW) -> dict[str, MemoryEntry]:
        persistent, _ = self.memories.active(self.user, self.project, None, at)
        return {entry.key: entry for entry in persistent}

    def write(self, entry: MemoryEntry, at: datetime = NOW) -> MemoryEntry:
        saved = self.memories.write(self.user, self.project, entry, at)
        assert saved is not None
        return saved[0]

    def start_sessions(self, count: int, at: datetime = NOW) -> None:
        for _ in range(count):
            dynamodb_client().update_item(
                **self.upkeep.session_started_request(self.user, self.project, clock.stamp(at))
            )


def chatter(count: int) -> list[str]:
    return [f"message {n} about the weather" for n in range(count)]


def entry(
    key: str, value: str, category: Category = Category.PREFERENCES, **more: Any
) -> MemoryEntry:
    return MemoryEntry(key=key, value=value, category=category, **more)


# Extraction


def test_extraction_waits_for_a_thread_of_six_messages() -> None:
    # Given a thread of five messages, the last user one stating a rule
    recall = Recall()
    thread = recall.thread([*chatter(4), "Always keep the header dark."])
    # When / Then: five is one too few
    assert recall.extract(thread).ran is False
    assert recall.entries() == {}
    # When the sixth arrives
    recall.add(thread, ["Noted."])
    report = recall.extract(thread)
    # Then it runs and the rule is remembered, as extracted
    assert report.ran is True
    [saved] = recall.entries().values()
    assert saved.source == Source.EXTRACTED
    assert "header dark" in saved.value


def test_tool_messages_do_not_count_toward_the_six() -> None:
    # Given five messages of conversation, the last user one stating a rule, and three of
    # the model's tool messages among them
    recall = Recall()
    thread = recall.thread([*chatter(2)])
    recall.add(thread, ["save_preference header_dark"], role="tool")
    recall.add(thread, [*chatter(2)])
    recall.add(thread, ["save_preference a", "save_preference b"], role="tool")
    recall.add(thread, ["Always keep the header dark."])
    # When / Then: eight messages, but five of conversation is one too few
    report = recall.extract(thread)
    assert (report.ran, report.why) == (False, "the thread is too short")
    assert recall.memories.meta(recall.user, recall.project).last_extraction_at is None
    # When the sixth arrives
    recall.add(thread, ["Noted."], role="assistant")
    # Then it runs
    assert recall.extract(thread).ran is True
    assert "header_dark" in recall.entries()


def test_extraction_runs_at_most_once_per_four_hours() -> None:
    recall = Recall()
    assert recall.settings.extract_cooldown_seconds == 4 * 3600
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."])
    cooldown = timedelta(seconds=recall.settings.extract_cooldown_seconds)
    assert recall.extract(thread, NOW).ran is True
    assert recall.extract(thread, NOW + cooldown - SECOND).ran is False
    assert recall.extract(thread, NOW + cooldown).ran is True


def test_two_workers_racing_for_one_extraction_slot_run_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recall = Recall()
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."])
    reports = race(monkeypatch, lambda: recall.extract(thread))
    assert sorted(report.ran for report in reports) == [False, True]


def race(monkeypatch: pytest.MonkeyPatch, work: Callable[[], Any]) -> list[Any]:
    """``work`` run by two workers at the same moment, with updates to one item applied
    one at a time, as DynamoDB applies them (moto's threaded server does not)."""
    client = dynamodb_client()
    update, one_at_a_time = client.update_item, threading.Lock()

    def serialised(**request: Any) -> Any:
        with one_at_a_time:
            return update(**request)

    monkeypatch.setattr(client, "update_item", serialised)
    start = threading.Barrier(2, timeout=10)
    results: list[Any] = []

    def worker() -> None:
        start.wait()
        results.append(work())

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for each in workers:
        each.start()
    for each in workers:
        each.join(20)
    return results


def test_two_workers_racing_for_one_consolidation_slot_run_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recall = Recall()
    for n in range(5):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    recall.start_sessions(3)
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    reports = race(monkeypatch, lambda: recall.consolidation.run(job, NOW))
    assert sorted(report.ran for report in reports) == [False, True]


class ThrottledOnce:
    """The model, throttled on its first call (Bedrock's ThrottlingException once the
    provider's retries ran out), then answering as the offline classifier does."""

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, messages: list[Message], spent: Any = None) -> list[MemoryEntry]:
        self.calls += 1
        if self.calls == 1:
            raise ModelThrottled("Bedrock ThrottlingException")
        return RuleExtractor().propose(messages, spent)


@contextmanager
def store_throttled_for_good_on(transaction: int) -> Iterator[None]:
    """The ``transaction``-th ``TransactWriteItems`` of the block (0 the first) throttled
    past botocore's retries, as DynamoDB answers a partition that stays hot."""
    with no_backoff_sleep(), injected(dynamodb_client()) as faults:
        plan = ["TransactWriteItems"] * (transaction + 1)
        faults.arm(transaction, THROTTLES[0], ALWAYS, plan=plan)
        yield


def test_an_extraction_the_model_failed_gives_its_slot_back_so_the_redelivery_runs() -> None:
    # Given a thread stating a rule, and a model throttled once
    model = ThrottledOnce()
    recall = Recall(extractor=model)
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."])
    # When the job meets the fault, it fails, for SQS to deliver it again
    with pytest.raises(ModelThrottled):
        recall.extract(thread)
    # Then the cooldown is as it was: never extracted
    assert recall.memories.meta(recall.user, recall.project).last_extraction_at is None
    # When SQS delivers the job again, a minute later
    report = recall.extract(thread, NOW + MINUTE)
    # Then it runs and remembers the rule, and the cooldown starts from this run
    assert (report.ran, model.calls) == (True, 2)
    assert "header_dark" in recall.entries()
    meta = recall.memories.meta(recall.user, recall.project)
    assert meta.last_extraction_at == clock.stamp(NOW + MINUTE)
    assert recall.extract(thread, NOW + 2 * MINUTE).ran is False


def test_an_extraction_that_failed_part_way_writes_the_rest_on_its_redelivery_once() -> None:
    # Given a thread stating two rules
    recall = Recall()
    thread = recall.thread(
        [*chatter(2), "Always keep the header dark.", "Noted.", "Never use stock photos.", "Ok."]
    )
    # When the store is throttled for good on the second entry's write
    with store_throttled_for_good_on(1), pytest.raises(Throttled):
        recall.extract(thread)
    # Then one rule landed, and the slot is free again
    assert len(recall.entries()) == 1
    assert recall.memories.meta(recall.user, recall.project).last_extraction_at is None
    # When SQS delivers the job again
    assert recall.extract(thread, NOW + MINUTE).ran is True
    # Then both rules are remembered, each written once: the redo found the first stored
    assert set(recall.entries()) == {"header_dark", "no_stock_photos"}
    for key in ("header_dark", "no_stock_photos"):
        history = recall.memories.history(recall.user, recall.project, key, None)
        assert [r.action for r in history if r.action != Action.KEPT] == [Action.CREATED]


def test_extraction_never_overwrites_an_explicit_entry_and_says_why_in_history() -> None:
    recall = Recall()
    recall.write(entry("header_dark", "keep the header light"))
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."])
    # When
    assert recall.extract(thread).ran is True
    # Then the user's own words stand, and the history records the decision
    kept = recall.entries()["header_dark"]
    assert (kept.value, kept.source) == ("keep the header light", Source.EXPLICIT)
    history = recall.memories.history(recall.user, recall.project, "header_dark", None)
    assert history[-1].action == Action.KEPT
    assert history[-1].reason and "explicit" in history[-1].reason


def test_extraction_records_a_duplicate_as_kept_and_writes_nothing_twice() -> None:
    recall = Recall()
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."])
    assert recall.extract(thread, NOW).ran is True
    first = recall.entries()
    later = NOW + timedelta(seconds=recall.settings.extract_cooldown_seconds)
    assert recall.extract(thread, later).ran is True
    assert recall.entries() == first
    [key] = first
    actions = [r.action for r in recall.memories.history(recall.user, recall.project, key, None)]
    assert actions == [Action.CREATED, Action.KEPT]


def test_extraction_leaves_a_rule_the_thread_holds_to_that_thread() -> None:
    # Given rules saved for one thread alone, and that thread saying them again: one under
    # the key extraction finds, one in the same words under a key of the user's own
    recall = Recall()
    thread = recall.thread([*chatter(4), "Always use a formal tone. Never use emoji.", "Noted."])
    ids = (recall.user, recall.project)
    for key, value in (("formal_tone", "formal, please"), ("emoji", "Never use emoji")):
        recall.write(entry(key, value, scope=Scope.THREAD, conversation_id=thread.conversation_id))
    # When
    assert recall.extract(thread).ran is True
    # Then the project's memory took neither
    assert recall.entries() == {}
    # And the thread's entries are as they were, their history saying why
    _, in_thread = recall.memories.active(*ids, thread.conversation_id, NOW)
    assert [(e.key, e.value, e.source) for e in in_thread] == [
        ("emoji", "Never use emoji", Source.EXPLICIT),
        ("formal_tone", "formal, please", Source.EXPLICIT),
    ]
    for key in ("formal_tone", "emoji"):
        [*_, last] = recall.memories.history(*ids, key, thread.conversation_id)
        assert last.action == Action.KEPT
        assert last.reason and "conversation alone" in last.reason


def test_a_rule_said_for_this_conversation_alone_is_not_made_project_memory() -> None:
    # Given a thread whose user scoped a rule to it, with no entry saved for it (the model
    # did not call its tool, or the user deleted the thread's entry since)
    recall = Recall()
    thread = recall.thread([*chatter(4), "For this chat, always use a formal tone.", "Noted."])
    # When
    assert recall.extract(thread).ran is True
    # Then the project's memory does not carry it
    assert recall.entries() == {}


def test_a_rule_the_user_deleted_comes_back_only_when_they_say_it_again() -> None:
    # Given a rule said, saved, then deleted by the user an hour later
    recall = Recall()
    said = NOW - timedelta(hours=2)
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."], said)
    recall.write(entry("header_dark", "Always keep the header dark"), said)
    ids = (recall.user, recall.project)
    assert recall.memories.delete(*ids, "header_dark", None, Source.EXPLICIT, NOW - HOUR)
    # When extraction reads the thread
    report = recall.extract(thread)
    # Then it ran, and the deleted rule stays deleted
    assert report.ran is True
    assert recall.entries() == {}
    # When the user says it again, after the deletion
    recall.add(thread, ["Always keep the header dark.", "Noted."], NOW)
    later = NOW + timedelta(seconds=recall.settings.extract_cooldown_seconds)
    assert recall.extract(thread, later).ran is True
    # Then extraction remembers it again
    back = recall.entries(later)["header_dark"]
    assert (back.value, back.source) == ("Always keep the header dark", Source.EXTRACTED)


def test_a_rule_consolidation_removed_can_still_be_extracted() -> None:
    # Given a rule said, then removed by consolidation (not by the user)
    recall = Recall()
    said = NOW - timedelta(hours=2)
    thread = recall.thread([*chatter(4), "Always keep the header dark.", "Noted."], said)
    saved = recall.write(entry("header_dark", "Always keep the header dark"), said)
    assert recall.memories.retire(recall.user, recall.project, saved, "merged", NOW - HOUR)
    # When / Then: the deletion was not the user's, so extraction may bring it back
    assert recall.extract(thread).ran is True
    assert "header_dark" in recall.entries()


def test_a_rule_the_user_reversed_stays_reversed_through_extraction_and_consolidation() -> None:
    # Given "never use stock photos", then its reversal, both saved by the chat's tool
    recall = Recall()
    thread = recall.thread(["Never use stock photos.", "Saved: no_stock_photos."])
    recall.write(entry("no_stock_photos", "Never use stock photos.", Category.FORBIDDEN))
    recall.add(thread, ["Use stock photos for the blog.", "Saved."], NOW + SECOND)
    recall.write(entry("stock_photos_blog", "Use stock photos for the blog."), NOW + SECOND)
    for n in range(4):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"), NOW + SECOND)
    day = NOW + timedelta(days=1)
    consolidate(recall, day)
    assert "no_stock_photos" not in recall.entries(day)
    # When the thread goes on, the old rule still among its latest messages
    recall.add(thread, [*chatter(4)], day + SECOND)
    assert recall.extract(thread, day + 2 * SECOND).ran is True
    # Then extraction does not bring it back, and no later consolidation has to
    assert "no_stock_photos" not in recall.entries(day + 2 * SECOND)
    later = day + timedelta(days=2)
    consolidate(recall, later)
    assert "no_stock_photos" not in recall.entries(later)
    assert "stock_photos_blog" in recall.entries(later)


def test_consolidation_weighs_an_extracted_rule_by_when_it_was_said_not_extracted() -> None:
    # Given a rule and its reversal in two threads, the reversal said later but extracted first
    recall = Recall()
    rule = recall.thread([*chatter(4), "Never use stock photos.", "Noted."])
    reversal = recall.thread([*chatter(4), "Always use stock photos for the blog.", "Ok."])
    recall.add(reversal, ["Always use stock photos for the blog.", "Ok."], NOW + HOUR)
    assert recall.extract(reversal, NOW + 2 * HOUR).ran is True
    later = NOW + 2 * HOUR + timedelta(seconds=recall.settings.extract_cooldown_seconds)
    assert recall.extract(rule, later).ran is True
    written = recall.entries(later)
    [old] = [e for e in written.values() if e.category == Category.FORBIDDEN]
    assert old.said_at == clock.stamp(NOW)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"), later)
    # When
    consolidate(recall, later + timedelta(days=1))
    # Then the reversal stands and the older rule went, though it was written last
    after = recall.entries(later + timedelta(days=1))
    assert old.key not in after
    assert any("blog" in e.value for e in after.values())


# Rolling summary


def window_of(recall: Recall, thread: Conversation, size: int) -> None:
    """The thread's window, its last ``size`` messages: where a turn would have left its
    start."""
    ids = (recall.user, recall.project, thread.conversation_id)
    [first, *_] = recall.messages.latest_after(*ids, None, size)
    dynamodb_client().update_item(
        TableName=recall.settings.conversations_table,
        Key=conversation_key(*ids),
        UpdateExpression="SET #start = :start",
        ExpressionAttributeNames={"#start": "windowStart"},
        ExpressionAttributeValues={":start": to_value(first.message_id)},
    )


def test_messages_that_left_the_window_are_folded_into_the_threads_summary() -> None:
    recall = Recall()
    thread = recall.thread(
        [
            "We sell handmade candles in Lisbon.",
            "Lovely.",
            "We decided to launch the shop in March.",
            "Great choice.",
            "How do we ship abroad?",
            "Let me think.",
            "hello",
            "hi",
        ]
    )
    window_of(recall, thread, 2)
    job = SummarizeJob(
        user_id=recall.user, project_id=recall.project, conversation_id=thread.conversation_id
    )
    # When
    report = recall.summaries.run(job, NOW)
    # Then the six messages before the window are in the summary, on the conversation
    assert report.folded == 6
    saved = recall.conversations.get(recall.user, recall.project, thread.conversation_id)
    assert saved is not None
    assert "handmade candles" in saved.summary
    assert "launch the shop in March" in saved.summary
    assert "ship abroad" in saved.summary
    # And running it again changes nothing
    assert recall.summaries.run(job, NOW).folded == 0
    again = recall.conversations.get(recall.user, recall.project, thread.conversation_id)
    assert again == saved


class SummaryModel:
    """A model that answers each summary request with one fact and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def converse(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(text=f"Facts:\n- Fact number {len(self.requests)}")


def test_a_long_thread_is_summarised_one_bounded_request_at_a_time() -> None:
    # Given a thread whose 60 messages of 3,000 characters left the window: 180,000
    # characters, nine times what one request may carry
    model = SummaryModel()
    bounds = {"summary_fold_max_chars": 20_000, "summary_message_max_chars": 4_000}
    settings = get_settings().model_copy(update=bounds)
    recall = Recall(
        summarizer=ModelSummarizer(
            model,
            "summary-model",
            settings.summary_max_chars,
            settings.summary_point_max_chars,
            settings.summary_max_tokens,
            fold_max_chars=settings.summary_fold_max_chars,
            message_max_chars=settings.summary_message_max_chars,
        ),
        **bounds,
    )
    page = "Copy for the spring catalogue, one product line at a time. " * 50
    thread = recall.thread([f"{n} {page}"[:3_000] for n in range(60)] + ["hello", "hi"])
    window_of(recall, thread, 2)
    job = SummarizeJob(
        user_id=recall.user, project_id=recall.project, conversation_id=thread.conversation_id
    )

    # When the job runs once
    first = recall.summaries.run(job, NOW)

    # Then it sent one request within the budget, saved what it covered and queued the rest
    (request,) = model.requests
    assert len(request.messages[0].text) < 20_000 + 500
    assert 0 < first.folded < 60
    saved = recall.conversations.get(recall.user, recall.project, thread.conversation_id)
    assert saved is not None and saved.summary == "Facts:\n- Fact number 1"
    assert recall.queue.jobs == [job]

    # When every queued fold runs in turn
    while recall.queue.jobs:
        recall.summaries.run(recall.queue.jobs.pop(0), NOW)

    # Then every request stayed within the budget, and the summary reaches the window
    assert len(model.requests) >= 9
    assert all(len(sent.messages[0].text) < 20_000 + 500 for sent in model.requests)
    done = recall.conversations.get(recall.user, recall.project, thread.conversation_id)
    assert done is not None and done.summary == f"Facts:\n- Fact number {len(model.requests)}"
    ids = (recall.user, recall.project, thread.conversation_id)
    [last_before_window, *_] = recall.messages.latest_after(*ids, None, 3)
    assert done.summary_through == last_before_window.message_id
    # And a job queued by a later turn finds nothing left to fold
    assert recall.summaries.run(job, NOW).folded == 0
    assert recall.queue.jobs == []


def test_clearing_the_context_starts_a_new_summary() -> None:
    recall = Recall()
    thread = recall.thread(["We sell handmade candles.", "ok", "x", "y"])
    window_of(recall, thread, 2)
    job = SummarizeJob(
        user_id=recall.user, project_id=recall.project, conversation_id=thread.conversation_id
    )
    recall.summaries.run(job, NOW)
    # When the context is cleared
    recall.conversations.mark_cleared(recall.user, recall.project, thread.conversation_id, new_id())
    # Then the summary is gone, and nothing from before the marker is folded again
    cleared = recall.conversations.get(recall.user, recall.project, thread.conversation_id)
    assert cleared is not None and cleared.summary == "" and cleared.summary_through is None
    assert recall.summaries.run(job, NOW).folded == 0


# Consolidation


def due_consolidations(recall: Recall, at: datetime) -> list[tuple[str, str]]:
    return [due for due in recall.upkeep.due_consolidations(at) if due[0] == recall.user]


def test_consolidation_needs_three_sessions_five_entries_and_a_day() -> None:
    recall = Recall()
    settings = recall.settings
    assert (settings.consolidate_min_sessions, settings.consolidate_min_memories) == (3, 5)
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    for n in range(settings.consolidate_min_memories):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    # Two sessions are one too few
    recall.start_sessions(settings.consolidate_min_sessions - 1)
    assert recall.consolidation.run(job, NOW).ran is False
    recall.start_sessions(1)
    assert recall.consolidation.run(job, NOW).ran is True
    # Then a day must pass, whatever the sessions
    day = timedelta(seconds=settings.consolidate_min_seconds)
    recall.start_sessions(3, NOW + day - SECOND)
    assert recall.consolidation.run(job, NOW + day - SECOND).ran is False
    assert recall.consolidation.run(job, NOW + day).ran is True


def test_four_entries_are_one_too_few_to_consolidate() -> None:
    recall = Recall()
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    for n in range(recall.settings.consolidate_min_memories - 1):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    recall.start_sessions(3)
    assert recall.consolidation.run(job, NOW).ran is False
    recall.write(entry("rule_last", "one more distinct standing rule"))
    assert recall.consolidation.run(job, NOW).ran is True


def test_expired_entries_not_yet_deleted_do_not_count_towards_five() -> None:
    # Given four entries and three that expired but the expire job has not deleted yet
    recall = Recall()
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    expired = clock.stamp(NOW - timedelta(hours=1))
    earlier = NOW - timedelta(hours=2)
    for n in range(4):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"), earlier)
    for n in range(3):
        recall.write(entry(f"sale_{n}", f"summer sale banner {n}", expires_at=expired), earlier)
    recall.start_sessions(3)
    # When
    report = recall.consolidation.run(job, NOW)
    # Then nothing is claimed: the day and the three sessions are still there to use
    assert report.ran is False
    meta = recall.memories.meta(recall.user, recall.project)
    assert meta.last_consolidation_at is None
    assert meta.sessions_since_consolidation == 3
    # And a fifth active entry is enough, with no new session
    recall.write(entry("rule_last", "one more distinct standing rule"))
    assert recall.consolidation.run(job, NOW).ran is True


def test_a_session_schedules_consolidation_and_a_refused_slot_moves_the_schedule() -> None:
    recall = Recall()
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    # Given one session: the user and project are due, and the fan-out queues them
    recall.start_sessions(1)
    assert due_consolidations(recall, NOW) == [(recall.user, recall.project)]
    # When the worker finds too few sessions, they leave the schedule until the next one
    assert recall.consolidation.run(job, NOW).ran is False
    assert due_consolidations(recall, NOW) == []
    recall.start_sessions(1)
    assert due_consolidations(recall, NOW) == [(recall.user, recall.project)]


def test_a_consolidation_within_the_day_is_rescheduled_to_when_the_day_is_over() -> None:
    recall = Recall()
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    for n in range(5):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    recall.start_sessions(3)
    assert recall.consolidation.run(job, NOW).ran is True
    # Given three new sessions an hour later
    later = NOW + timedelta(hours=1)
    recall.start_sessions(3, later)
    assert recall.consolidation.run(job, later).ran is False
    # Then it is due again exactly when the day is over, not before
    day = timedelta(seconds=recall.settings.consolidate_min_seconds)
    assert due_consolidations(recall, NOW + day - SECOND) == []
    assert due_consolidations(recall, NOW + day) == [(recall.user, recall.project)]


def test_a_consolidation_that_failed_part_way_is_finished_by_its_redelivery() -> None:
    # Given five entries: one rule saved twice, another saved twice, and one more
    recall = Recall()
    recall.write(entry("header_dark", "Keep the header dark."))
    recall.write(entry("dark_header", "Keep the header dark"), NOW + SECOND)
    recall.write(entry("serif_headings", "Use serif headings."))
    recall.write(entry("headings_serif", "Use serif headings"), NOW + SECOND)
    recall.write(entry("ship_fridays", "We ship on Fridays"))
    recall.start_sessions(3)
    job = ConsolidateJob(user_id=recall.user, project_id=recall.project)
    at = NOW + 2 * SECOND
    # When the store is throttled for good on the plan's second delete
    with store_throttled_for_good_on(1), pytest.raises(Throttled):
        recall.consolidation.run(job, at)
    # Then one copy is gone, and the day, the sessions and the schedule are given back
    assert len(recall.entries(at)) == 4
    meta = recall.memories.meta(recall.user, recall.project)
    assert (meta.last_consolidation_at, meta.sessions_since_consolidation) == (None, 3)
    assert due_consolidations(recall, at) == [(recall.user, recall.project)]
    # When SQS delivers the job again: four entries now, under the five it needs to start
    later = at + MINUTE
    report = recall.consolidation.run(job, later)
    # Then it finishes the plan, and each copy went once, with one history record
    assert (report.ran, report.retired) == (True, 1)
    after = recall.entries(later)
    assert set(after) == {"dark_header", "headings_serif", "ship_fridays"}
    for key in ("header_dark", "serif_headings"):
        history = recall.memories.history(recall.user, recall.project, key, None)
        assert [r.action for r in history] == [Action.CREATED, Action.DELETED]
    # And the slot is spent as a run that succeeded spends it
    meta = recall.memories.meta(recall.user, recall.project)
    assert (meta.last_consolidation_at, meta.sessions_since_consolidation) == (
        clock.stamp(later),
        0,
    )
    assert due_consolidations(recall, later) == []


def consolidate(recall: Recall, at: datetime = NOW) -> None:
    recall.start_sessions(3, at)
    report = recall.consolidation.run(
        ConsolidateJob(user_id=recall.user, project_id=recall.project), at
    )
    assert report.ran is True


def test_consolidation_merges_two_explicit_entries_of_one_rule_keeping_the_users_words() -> None:
    recall = Recall()
    recall.write(entry("header_dark", "Keep the header dark."))
    recall.write(entry("dark_header", "Keep the header dark"), NOW + SECOND)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    before = {e.value for e in recall.entries().values()}
    # When
    consolidate(recall, NOW + 2 * SECOND)
    # Then one of the two remains, word for word, and the history says what went into what
    after = recall.entries()
    assert len([k for k in after if "header" in k]) == 1
    assert {e.value for e in after.values()} <= before
    [gone] = {"header_dark", "dark_header"} - set(after)
    [record] = [
        r
        for r in recall.memories.history(recall.user, recall.project, gone, None)
        if r.action == Action.DELETED
    ]
    assert record.source == Source.CONSOLIDATED
    assert record.reason and record.reason.startswith("merge")


def test_a_contradiction_is_resolved_for_the_newer_value() -> None:
    recall = Recall()
    recall.write(entry("header_color", "dark", Category.BRAND))
    recall.write(entry("header_colour", "light", Category.BRAND), NOW + SECOND)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    consolidate(recall, NOW + 2 * SECOND)
    after = recall.entries()
    assert "header_colour" in after and "header_color" not in after


def test_a_forbidden_entry_stays_unless_a_newer_one_explicitly_contradicts_it() -> None:
    recall = Recall()
    recall.write(entry("no_stock_photos", "Never use stock photos.", Category.FORBIDDEN))
    recall.write(entry("photo_style", "Photos look nice"), NOW + SECOND)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    consolidate(recall, NOW + 2 * SECOND)
    assert "no_stock_photos" in recall.entries(NOW + 2 * SECOND)
    # When a newer entry says the opposite
    later = NOW + timedelta(days=2)
    recall.write(entry("use_stock_photos", "Use stock photos.", Category.PREFERENCES), later)
    consolidate(recall, later + SECOND)
    assert "no_stock_photos" not in recall.entries(later + SECOND)


def test_consolidation_keeps_both_saves_of_a_forbidden_rule() -> None:
    # Given one forbidden rule saved twice, and a preference saying the same
    recall = Recall()
    recall.write(entry("no_stock_photos", "never use stock photos", Category.FORBIDDEN))
    recall.write(
        entry("avoid_stock_photos", "Never use stock photos.", Category.FORBIDDEN), NOW + SECOND
    )
    recall.write(entry("stock_photos", "Never use stock photos!"), NOW + SECOND)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    # When
    consolidate(recall, NOW + 2 * SECOND)
    # Then both forbidden entries stand; only the preference was merged away
    after = recall.entries(NOW + 2 * SECOND)
    assert {"no_stock_photos", "avoid_stock_photos"} <= set(after)
    assert "stock_photos" not in after
    for key in ("no_stock_photos", "avoid_stock_photos"):
        history = recall.memories.history(recall.user, recall.project, key, None)
        assert [r.action for r in history] == [Action.CREATED]


def test_consolidation_never_deletes_the_users_rule_for_an_extracted_copy() -> None:
    # Given extraction inferred a forbidden rule, then the user saved it in their own words
    recall = Recall()
    thread = recall.thread([*chatter(4), "Never use stock photos on product pages.", "Noted."])
    assert recall.extract(thread).ran is True
    [inferred] = recall.entries().values()
    assert (inferred.source, inferred.category) == (Source.EXTRACTED, Category.FORBIDDEN)
    mine = entry("stock_photos", "Don't use stock photos on product pages")
    recall.write(mine, NOW + SECOND)
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"), NOW + SECOND)
    # When
    consolidate(recall, NOW + 2 * SECOND)
    # Then the user's entry stays word for word, and so does the forbidden copy
    after = recall.entries(NOW + 2 * SECOND)
    assert after["stock_photos"].value == mine.value
    assert after["stock_photos"].source == Source.EXPLICIT
    assert inferred.key in after


def test_consolidation_keeps_the_users_short_rules_once_imported() -> None:
    # Given the user's own short rules, brought over by an import, and a vague extracted one
    recall = Recall()
    recall.write(entry("tone", "warm", Category.BRAND, source=Source.IMPORTED))
    recall.write(entry("currency", "EUR only", Category.CONTEXT, source=Source.IMPORTED))
    recall.write(entry("hero", "bold", source=Source.EXTRACTED, confidence=0.9))
    for n in range(3):
        recall.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    # When
    consolidate(recall, NOW + SECOND)
    # Then only the extracted one is pruned as vague
    after = recall.entries(NOW + SECOND)
    assert {"tone", "currency"} <= set(after)
    assert "hero" not in after


def test_consolidation_drops_the_least_useful_entries_down_to_the_cap() -> None:
    # Given 53 entries where the cap is 50 (written while a looser cap allowed them)
    loose = Recall(memory_cap=60)
    for n in range(50):
        loose.write(entry(f"rule_{n}", f"a distinct standing rule number {n}"))
    for n in range(3):
        loose.write(
            entry(
                f"guess_{n}",
                f"an extracted guess about colour {n}",
                source=Source.EXTRACTED,
                confidence=0.7,
            )
        )
    recall = Recall()
    recall.user, recall.project = loose.user, loose.project
    # When
    consolidate(recall, NOW + SECOND)
    # Then 50 remain, the guesses gone first
    after = recall.entries(NOW + SECOND)
    assert len(after) == recall.settings.memory_cap == 50
    assert not [key for key in after if key.startswith("guess_")]


# Maintenance


def test_an_expired_entry_is_deleted_with_an_expired_record_once() -> None:
    recall = Recall()
    expires = NOW + timedelta(hours=2)
    recall.write(entry("sale", "summer sale banner", expires_at=clock.stamp(expires)))
    recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires - SECOND)
    assert "sale" in recall.entries(expires - SECOND)
    report = recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires)
    again = recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires)
    assert report.changed >= 1 and again.changed == 0
    history = recall.memories.history(recall.user, recall.project, "sale", None)
    assert [r.action for r in history] == [Action.CREATED, Action.EXPIRED]
    assert recall.memories.meta(recall.user, recall.project).persistent_count == 0


def test_the_fan_out_queues_one_job_per_due_user_and_project() -> None:
    recall = Recall()
    recall.start_sessions(2)
    report = recall.maintenance.run(ScheduledJob.CONSOLIDATE, NOW)
    assert report.read >= 1
    assert ConsolidateJob(user_id=recall.user, project_id=recall.project) in recall.queue.jobs


def test_consolidation_never_deletes_an_entry_the_user_changed_after_the_plan_read_it() -> None:
    # Given an entry as a consolidation plan read it, then changed by the user
    recall = Recall()
    read = recall.write(entry("header_dark", "Keep the header dark."))
    recall.write(entry("header_dark", "Keep the header navy."), NOW + SECOND)
    # When consolidation retires what it read
    retired = recall.memories.retire(recall.user, recall.project, read, "merge: test", NOW)
    # Then the user's newer words stand
    assert retired is False
    assert recall.entries(NOW + SECOND)["header_dark"].value == "Keep the header navy."


def two_due(recall: Recall) -> datetime:
    """``a_sale`` and ``b_sale``, both due at the moment returned."""
    expires = NOW + timedelta(hours=2)
    for key in ("a_sale", "b_sale"):
        recall.write(entry(key, "summer sale banner", expires_at=clock.stamp(expires)))
    return expires


def test_an_entry_that_cannot_be_expired_holds_up_none_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two entries due, the first of which cannot be expired
    recall = Recall()
    expires = two_due(recall)
    expire = MemoryStore.expire

    def failing_for_a(self: MemoryStore, user: str, project: str, key: str, *rest: Any) -> bool:
        if key == "a_sale":
            raise ValueError("an item the table refuses")
        return expire(self, user, project, key, *rest)

    monkeypatch.setattr(MemoryStore, "expire", failing_for_a)
    # When the job runs, it fails, but only after expiring the other
    with pytest.raises(Unavailable):
        recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires)
    assert "b_sale" not in recall.entries(expires - SECOND)
    # And the next run takes up the one left (and any other test's left due at that time)
    monkeypatch.setattr(MemoryStore, "expire", expire)
    assert recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires).changed >= 1
    assert recall.entries(expires - SECOND) == {}
    history = recall.memories.history(recall.user, recall.project, "a_sale", None)
    assert [record.action for record in history] == [Action.CREATED, Action.EXPIRED]


def test_a_busy_table_ends_the_expiry_run_at_its_first_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two entries due, and a table that throttles every write
    recall = Recall()
    expires = two_due(recall)
    asked: list[str] = []

    def throttled(self: MemoryStore, user: str, project: str, key: str, *rest: Any) -> bool:
        asked.append(key)
        raise Throttled("The store is busy; try again shortly.")

    monkeypatch.setattr(MemoryStore, "expire", throttled)
    # When the job runs, then it stops at the first: asking on would only add to the load
    with pytest.raises(Throttled):
        recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires)
    assert len(asked) == 1


class MeetsATransactionOnce:
    """The memory store's client, whose first transaction meets another one on its items."""

    def __init__(self) -> None:
        self.real = dynamodb_client()
        self.met = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def transact_write_items(self, **request: Any) -> Any:
        if not self.met:
            self.met = True
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                    "CancellationReasons": [{"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        return self.real.transact_write_items(**request)


def test_an_expiry_that_met_another_transaction_is_sent_again_in_the_same_run() -> None:
    # Given an entry due, whose delete meets a turn's transaction once
    recall = Recall()
    expires = NOW + timedelta(hours=2)
    recall.write(entry("sale", "summer sale banner", expires_at=clock.stamp(expires)))
    client = MeetsATransactionOnce()
    recall.memories._client = client  # type: ignore[assignment]
    # When the job runs
    recall.maintenance.run(ScheduledJob.EXPIRE_MEMORIES, expires)
    # Then it read the entry again and expired it, not taking the meeting for a renewal
    assert client.met
    assert "sale" not in recall.entries(expires - SECOND)
    history = recall.memories.history(recall.user, recall.project, "sale", None)
    assert [record.action for record in history] == [Action.CREATED, Action.EXPIRED]
