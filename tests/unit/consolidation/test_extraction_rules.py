"""What a background extraction writes: one decision per candidate, ADD, UPDATE or NONE."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from recall.domain.extraction import (
    ExtractionAction,
    ExtractionDecision,
    decide_extraction,
    deleted_since_said,
    entry_to_write,
    stated_at,
)
from recall.domain.memory import Action, Category, HistoryRecord, MemoryEntry, Scope, Source
from recall.domain.messages import Message, MessageRole

MIN_CONFIDENCE = 0.6
MAX_NEW = 8
EARLIER = "2025-02-01T09:00:00.000Z"
LATER = "2025-02-20T09:00:00.000Z"


def candidate(
    key: str,
    value: str,
    confidence: float = 0.8,
    category: Category = Category.PREFERENCES,
) -> MemoryEntry:
    return MemoryEntry(
        key=key, value=value, category=category, source=Source.EXTRACTED, confidence=confidence
    )


def stored(
    key: str,
    value: str,
    source: Source = Source.EXTRACTED,
    category: Category = Category.PREFERENCES,
    updated_at: str = EARLIER,
) -> MemoryEntry:
    return MemoryEntry(
        key=key,
        value=value,
        category=category,
        source=source,
        confidence=1.0 if source == Source.EXPLICIT else 0.8,
        created_at=updated_at,
        updated_at=updated_at,
    )


def decide(
    candidates: list[MemoryEntry],
    existing: list[MemoryEntry] | None = None,
    *,
    min_confidence: float = MIN_CONFIDENCE,
    max_new: int = MAX_NEW,
) -> list[ExtractionDecision]:
    return decide_extraction(
        candidates, existing or [], min_confidence=min_confidence, max_new=max_new
    )


def only(decisions: list[ExtractionDecision]) -> ExtractionDecision:
    assert len(decisions) == 1
    return decisions[0]


def test_a_candidate_on_a_new_subject_is_added_as_proposed() -> None:
    # Given
    proposed = candidate("header_color", "dark navy")
    # When
    decision = only(decide([proposed], [stored("tone", "warm")]))
    # Then
    assert decision.action is ExtractionAction.ADD
    assert decision.existing is None
    assert entry_to_write(decision) == proposed


def test_confidence_exactly_at_the_minimum_is_kept_and_just_below_is_refused() -> None:
    # Given one candidate at 0.6 and one at 0.59
    at_minimum = candidate("header_color", "dark navy", confidence=0.6)
    below = candidate("footer_color", "light grey", confidence=0.59)
    # When
    decisions = decide([at_minimum, below])
    # Then every candidate has a decision, and only the one below the minimum is refused
    by_key = {decision.candidate.key: decision for decision in decisions}
    assert by_key["header_color"].action is ExtractionAction.ADD
    assert by_key["footer_color"].action is ExtractionAction.NONE
    assert "below the minimum 0.6" in by_key["footer_color"].reason
    assert entry_to_write(by_key["footer_color"]) is None


def test_eight_writes_are_kept() -> None:
    # Given exactly max_new candidates on different subjects
    candidates = [candidate(f"topic_{n}", f"value number {n}") for n in range(MAX_NEW)]
    # When
    decisions = decide(candidates)
    # Then
    assert [decision.action for decision in decisions] == [ExtractionAction.ADD] * MAX_NEW


def test_the_ninth_write_is_refused_for_the_limit_and_it_is_the_least_confident() -> None:
    # Given nine candidates, the least confident in the middle of the batch, one an update
    confidences = [0.9, 0.8, 0.85, 0.61, 0.7, 0.75, 0.95, 0.65, 0.99]
    candidates = [
        candidate(f"topic_{n}", f"value number {n}", confidence)
        for n, confidence in enumerate(confidences)
    ]
    existing = [stored("topic_0", "an older value")]
    # When
    decisions = decide(candidates, existing)
    # Then eight are written and the 0.61 one is refused for the limit
    written = [d for d in decisions if d.action is not ExtractionAction.NONE]
    refused = [d for d in decisions if d.action is ExtractionAction.NONE]
    assert len(written) == MAX_NEW
    assert [d.candidate.key for d in refused] == ["topic_3"]
    assert "limit" in refused[0].reason
    assert ExtractionAction.UPDATE in {d.action for d in written}


def test_refused_candidates_do_not_use_up_the_limit() -> None:
    # Given a duplicate, a low-confidence one and a contradiction of an explicit entry,
    # then max_new writable candidates, all less confident than the refused ones
    existing = [stored("tone", "warm"), stored("font", "serif", Source.EXPLICIT)]
    refused = [
        candidate("tone", "Warm.", 0.99),
        candidate("font", "sans serif", 0.98),
        candidate("logo", "blue", 0.5),
    ]
    writable = [candidate(f"topic_{n}", f"value number {n}", 0.7) for n in range(MAX_NEW)]
    # When
    decisions = decide(refused + writable, existing)
    # Then
    assert sum(d.action is ExtractionAction.ADD for d in decisions) == MAX_NEW


def test_decisions_come_in_the_order_to_write_them_most_confident_first() -> None:
    # Given
    candidates = [
        candidate("a_topic", "first value", 0.7),
        candidate("b_topic", "second value", 0.9),
        candidate("c_topic", "third value", 0.7),
    ]
    # When
    decisions = decide(candidates)
    # Then ties put the later candidate, from the more recent turns, first
    assert [d.candidate.key for d in decisions] == ["b_topic", "c_topic", "a_topic"]


def test_two_candidates_for_the_same_key_keep_the_more_confident() -> None:
    # Given
    weaker = candidate("header_color", "light grey", 0.9)
    stronger = candidate("header_color", "dark navy", 0.95)
    # When
    decisions = decide([stronger, weaker])
    # Then
    assert [(d.candidate.value, d.action) for d in decisions] == [
        ("dark navy", ExtractionAction.ADD),
        ("light grey", ExtractionAction.NONE),
    ]
    assert "superseded in this batch by 'header_color'" in decisions[1].reason


def test_two_equally_confident_candidates_for_the_same_key_keep_the_later() -> None:
    # Given
    earlier = candidate("header_color", "light grey", 0.8)
    later = candidate("header_color", "dark navy", 0.8)
    # When
    decisions = decide([earlier, later])
    # Then
    written = [d.candidate.value for d in decisions if d.action is ExtractionAction.ADD]
    assert written == ["dark navy"]


def test_two_candidates_under_keys_of_the_same_meaning_are_one_subject_in_a_batch() -> None:
    decisions = decide(
        [candidate("header_dark", "yes, dark", 0.7), candidate("dark_header", "dark", 0.9)]
    )
    assert [d.action for d in decisions] == [ExtractionAction.ADD, ExtractionAction.NONE]
    assert decisions[0].candidate.key == "dark_header"


def test_two_candidates_that_would_change_one_stored_entry_change_it_once() -> None:
    # Given a stored brand tone, and two candidates that each reach it another way
    existing = stored("brand_tone", "light and breezy", category=Category.BRAND)
    by_subject = candidate("tone", "warm and plain", 0.9, Category.BRAND)
    by_key = candidate("brand_tone", "cold and formal", 0.8)
    # When
    decisions = decide([by_key, by_subject], [existing])
    # Then
    assert [(d.candidate, d.action) for d in decisions] == [
        (by_subject, ExtractionAction.UPDATE),
        (by_key, ExtractionAction.NONE),
    ]
    assert "superseded in this batch by 'tone'" in decisions[1].reason


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tone", "Warm and plainspoken."),
        ("brand_tone", "warm and plainspoken"),
        ("tone", "warm and plainspoken, please"),
    ],
)
def test_a_candidate_that_repeats_a_stored_entry_is_a_duplicate(key: str, value: str) -> None:
    # Given
    existing = stored("tone", "warm and plainspoken", category=Category.BRAND)
    # When
    decision = only(decide([candidate(key, value, category=Category.BRAND)], [existing]))
    # Then
    assert decision.action is ExtractionAction.NONE
    assert decision.existing == existing
    assert decision.reason == "duplicate: already stored as 'tone'"


@pytest.mark.parametrize("key", ["header_colour", "colour_header", "header_color"])
def test_a_contradiction_updates_the_stored_entry_and_keeps_its_key(key: str) -> None:
    # Given
    existing = stored("header_color", "dark", updated_at=EARLIER)
    proposed = candidate(key, "light", 0.7)
    # When
    decision = only(decide([proposed], [existing]))
    # Then
    assert decision.action is ExtractionAction.UPDATE
    assert decision.existing == existing
    written = entry_to_write(decision)
    assert written is not None
    assert (written.key, written.value, written.source, written.confidence) == (
        "header_color",
        "light",
        Source.EXTRACTED,
        0.7,
    )


def test_a_candidate_said_before_the_stored_entry_does_not_overwrite_it() -> None:
    # Given "light" stored from a message at LATER, and "dark" read from one at EARLIER
    # (a late job, or another thread read after it)
    existing = stored("header_color", "light").model_copy(update={"said_at": LATER})
    proposed = candidate("header_color", "dark").model_copy(update={"said_at": EARLIER})
    # When
    decision = only(decide([proposed], [existing]))
    # Then the later word stands
    assert decision.action is ExtractionAction.NONE
    assert entry_to_write(decision) is None
    assert decision.reason == "said before 'header_color', which stands as the later word"


def test_a_candidate_said_after_the_stored_entry_was_written_updates_it() -> None:
    # Given an entry written at EARLIER (no message time of its own) and a later message
    existing = stored("header_color", "light", updated_at=EARLIER)
    proposed = candidate("header_color", "dark").model_copy(update={"said_at": LATER})
    # When
    decision = only(decide([proposed], [existing]))
    # Then
    assert decision.action is ExtractionAction.UPDATE


def test_an_update_writes_into_the_stored_entrys_thread() -> None:
    # Given a thread entry and a candidate for that thread
    thread = "01JTHREAD000000000000000AA"
    existing = stored("hero", "dark").model_copy(
        update={"scope": Scope.THREAD, "conversation_id": thread}
    )
    proposed = candidate("hero", "light").model_copy(
        update={"scope": Scope.THREAD, "conversation_id": thread}
    )
    # When
    written = entry_to_write(only(decide([proposed], [existing])))
    # Then
    assert written is not None
    assert (written.scope, written.conversation_id, written.value) == (
        Scope.THREAD,
        thread,
        "light",
    )


def test_a_contradiction_updates_the_stored_entry_with_the_same_key_first() -> None:
    # Given two stored entries on one subject (not yet consolidated)
    same_key = stored("header_color", "dark", updated_at=EARLIER)
    newer = stored("header_colour", "black", updated_at=LATER)
    # When
    decision = only(decide([candidate("header_color", "light")], [newer, same_key]))
    # Then
    assert decision.existing == same_key


def test_a_contradiction_of_a_differently_named_key_updates_the_newest() -> None:
    older = stored("colour_header", "dark", updated_at=EARLIER)
    newer = stored("header_colours", "black", updated_at=LATER)
    decision = only(decide([candidate("header_color", "light")], [older, newer]))
    assert decision.existing == newer


@pytest.mark.parametrize("key", ["header_color", "header_colour", "colour_header"])
def test_extraction_never_updates_an_explicit_entry(key: str) -> None:
    # Given the user's own entry and a confident candidate that contradicts it
    explicit = stored("header_color", "dark", Source.EXPLICIT)
    # When
    decision = only(decide([candidate(key, "light", 0.99)], [explicit]))
    # Then
    assert decision.action is ExtractionAction.NONE
    assert decision.existing == explicit
    assert "explicit" in decision.reason
    assert entry_to_write(decision) is None


def test_an_explicit_entry_on_the_subject_blocks_the_update_of_a_background_one() -> None:
    explicit = stored("colour_header", "dark", Source.EXPLICIT)
    background = stored("header_color", "black")
    decision = only(decide([candidate("header_color", "light")], [background, explicit]))
    assert decision.action is ExtractionAction.NONE
    assert decision.existing == explicit


def test_extraction_never_adds_a_rule_an_explicit_entry_contradicts() -> None:
    # Given the user reversed "never use stock photos" with their own explicit entry
    reversal = stored("stock_photos_blog", "Use stock photos for the blog.", Source.EXPLICIT)
    # When extraction reads the old rule again, under a key of another subject
    decision = only(
        decide(
            [candidate("no_stock_photos", "Never use stock photos.", category=Category.FORBIDDEN)],
            [reversal],
        )
    )
    # Then it is not added, and the decision names the explicit entry
    assert decision.action is ExtractionAction.NONE
    assert decision.existing == reversal
    assert "explicit" in decision.reason


def test_a_rule_an_extracted_entry_contradicts_may_still_be_added() -> None:
    background = stored("stock_photos_blog", "Use stock photos for the blog.")
    proposed = candidate("no_stock_photos", "Never use stock photos.", category=Category.FORBIDDEN)
    assert only(decide([proposed], [background])).action is ExtractionAction.ADD


def test_an_update_carries_when_the_candidate_was_said() -> None:
    proposed = candidate("header_color", "light grey").model_copy(update={"said_at": LATER})
    decision = only(decide([proposed], [stored("header_colour", "dark navy")]))
    written = entry_to_write(decision)
    assert written is not None and written.said_at == LATER


def test_a_stored_forbidden_entry_changes_only_when_a_candidate_says_the_opposite() -> None:
    # Given an extracted forbidden entry
    rule = stored("no_stock_photos", "never use stock photos", category=Category.FORBIDDEN)
    # When a neutral candidate, an opposing one and a stricter rule come
    neutral = only(decide([candidate("stock_photos", "stock photos from unsplash")], [rule]))
    opposing = only(decide([candidate("stock_photos", "use stock photos for the blog")], [rule]))
    stricter = only(
        decide(
            [candidate("stock_photos", "no stock photos or clip art", category=Category.FORBIDDEN)],
            [rule],
        )
    )
    # Then only the opposing and the stricter one change it
    assert neutral.action is ExtractionAction.NONE
    assert "forbidden" in neutral.reason
    assert opposing.action is ExtractionAction.UPDATE
    written = entry_to_write(opposing)
    assert written is not None
    assert (written.key, written.category) == ("no_stock_photos", Category.PREFERENCES)
    assert stricter.action is ExtractionAction.UPDATE


def test_a_candidate_from_the_chat_model_is_not_a_background_candidate() -> None:
    with pytest.raises(ValueError, match="extracted"):
        decide([candidate("tone", "warm").model_copy(update={"source": Source.EXPLICIT})])


def test_a_candidate_the_thread_holds_by_key_or_by_words_stays_the_threads() -> None:
    # Given two rules the user saved for one thread alone
    thread = [
        MemoryEntry(
            key=key,
            value=value,
            category=Category.BRAND,
            scope=Scope.THREAD,
            conversation_id="01JTHREADAAAAAAAAAAAAAAAAA",
        )
        for key, value in (("formal_tone", "formal"), ("emoji", "Never use emoji"))
    ]
    # When extraction proposes them for the project: one by key, one by its words
    decisions = decide_extraction(
        [
            candidate("formal_tone", "Always use a formal tone"),
            candidate("no_emoji", "never emoji"),
        ],
        [],
        min_confidence=MIN_CONFIDENCE,
        max_new=MAX_NEW,
        thread=thread,
    )
    # Then neither is written, each meeting the thread's entry
    assert [(d.action, d.existing) for d in decisions] == [
        (ExtractionAction.NONE, thread[1]),
        (ExtractionAction.NONE, thread[0]),
    ]
    assert all("conversation alone" in decision.reason for decision in decisions)


def test_a_withdrawn_candidate_is_not_written_and_leaves_its_slot_to_the_next() -> None:
    # Given two candidates, the more confident one deleted by the user, and a limit of one
    asked: list[str] = []

    def withdrawn(proposed: MemoryEntry) -> str | None:
        asked.append(proposed.key)
        return "deleted by the user" if proposed.key == "header_dark" else None

    # When
    decisions = decide_extraction(
        [
            candidate("tone", "warm"),
            candidate("header_dark", "always dark", confidence=0.9),
            candidate("font", "serif", confidence=0.5),
            candidate("logo", "round", confidence=0.7),
        ],
        [stored("tone", "cold")],
        min_confidence=MIN_CONFIDENCE,
        max_new=1,
        withdrawn=withdrawn,
    )
    # Then the deleted one is NONE with the reason, and the other takes the one write
    assert [(d.candidate.key, d.action, d.reason) for d in decisions][:2] == [
        ("header_dark", ExtractionAction.NONE, "deleted by the user"),
        ("tone", ExtractionAction.UPDATE, "restates 'tone' with a different value"),
    ]
    # And only a candidate about to be written under a key not stored, within the limit,
    # was asked about: not "tone" (stored), nor "logo" (past the limit)
    assert asked == ["header_dark"]


def record(action: Action, source: Source | None, at: str) -> HistoryRecord:
    return HistoryRecord(
        key="header_dark", scope=Scope.PERSISTENT, action=action, source=source, at=at
    )


def test_only_the_users_deletion_since_the_statement_withdraws_it() -> None:
    deleted = record(Action.DELETED, Source.EXPLICIT, LATER)
    assert deleted_since_said(deleted, EARLIER)
    assert deleted_since_said(deleted, LATER)
    assert deleted_since_said(record(Action.DELETED, Source.EXPLICIT, EARLIER), LATER) is None
    assert deleted_since_said(record(Action.DELETED, Source.CONSOLIDATED, LATER), EARLIER) is None
    assert deleted_since_said(record(Action.EXPIRED, None, LATER), EARLIER) is None
    assert deleted_since_said(record(Action.CREATED, Source.EXPLICIT, LATER), EARLIER) is None
    assert deleted_since_said(None, EARLIER) is None


def test_a_candidate_is_dated_by_the_newest_user_message_that_says_it() -> None:
    def said(role: MessageRole, text: str, at: str) -> Message:
        return Message(message_id=at, role=role, content=text, created_at=at)

    messages = [
        said("user", "hello", "2025-02-01T09:00:00.000Z"),
        said("user", "Always keep the headers dark.", "2025-02-02T09:00:00.000Z"),
        said("assistant", "Always keep the header dark", "2025-02-03T09:00:00.000Z"),
        said("user", "Please forget header_dark", "2025-02-04T09:00:00.000Z"),
        said("user", "Don't keep the header dark.", "2025-02-05T09:00:00.000Z"),
    ]
    header = candidate("header_dark", "Always keep the header dark")
    # The assistant's echo and the opposite rule said later do not date it
    assert stated_at(header, messages) == "2025-02-02T09:00:00.000Z"
    # A paraphrase no message holds is as old as the oldest message read
    assert stated_at(candidate("dark", "dark top bar"), messages) == "2025-02-01T09:00:00.000Z"


def test_no_candidates_means_no_decisions() -> None:
    assert decide([], [stored("tone", "warm")]) == []


_KEYS = ["header_color", "header_colour", "colour_header", "tone", "brand_tone", "font", "logo"]
_VALUES = ["dark", "Dark.", "light grey", "warm and plain", "never use serif", "use serif"]

batches = st.lists(
    st.builds(
        MemoryEntry,
        key=st.sampled_from(_KEYS),
        value=st.sampled_from(_VALUES),
        category=st.sampled_from(list(Category)),
        source=st.just(Source.EXTRACTED),
        confidence=st.sampled_from([0.3, 0.59, 0.6, 0.61, 0.9]),
    ),
    max_size=10,
)
stored_memories = st.lists(
    st.builds(
        stored,
        key=st.sampled_from(_KEYS),
        value=st.sampled_from(_VALUES),
        source=st.sampled_from(list(Source)),
        category=st.sampled_from(list(Category)),
    ),
    max_size=5,
    unique_by=lambda entry: entry.key,
)


@settings(max_examples=300, deadline=None)
@given(batches, stored_memories, st.integers(min_value=0, max_value=4))
def test_any_batch_gets_one_decision_each_within_the_limit_and_never_touches_explicit(
    candidates: list[MemoryEntry], existing: list[MemoryEntry], max_new: int
) -> None:
    # When
    decisions = decide(candidates, existing, max_new=max_new)
    # Then
    assert sorted(map(id, (d.candidate for d in decisions))) == sorted(map(id, candidates))
    written = [entry_to_write(d) for d in decisions if d.action is not ExtractionAction.NONE]
    assert len(written) <= max_new
    assert len({entry.key for entry in written if entry is not None}) == len(written)
    explicit_keys = {entry.key for entry in existing if entry.source == Source.EXPLICIT}
    assert not any(entry is not None and entry.key in explicit_keys for entry in written)
    assert all(
        d.candidate.confidence >= MIN_CONFIDENCE
        for d in decisions
        if d.action is not ExtractionAction.NONE
    )
