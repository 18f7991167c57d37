"""Which jobs a turn leaves for the worker."""

from __future__ import annotations

from recall.domain.conversations import Conversation
from recall.domain.jobs import AnyJob, ExtractJob, SummarizeJob
from recall.domain.memory_proposals import carries_signals
from recall.services.followups import TurnFollowUps
from recall.settings import Settings
from recall.store.jobs import JobQueue

THREAD = Conversation(
    user_id="u1",
    project_id="01JPROJECTAAAAAAAAAAAAAAAA",
    conversation_id="01JTHREADAAAAAAAAAAAAAAAAA",
    title="t",
    created_at="2025-01-01T00:00:00.000Z",
    updated_at="2025-01-01T00:00:00.000Z",
)
RULE = "Always keep the header dark."
IDS = {
    "user_id": THREAD.user_id,
    "project_id": THREAD.project_id,
    "conversation_id": THREAD.conversation_id,
}


NOW = "2025-01-01T12:00:00.000Z"
LATER = "2025-01-01T13:00:00.000Z"


def jobs_after(
    messages_now: int, text: str, left_window: bool = False, sends_memory: bool = True
) -> list[AnyJob]:
    return followups().jobs_after(
        THREAD,
        messages_now,
        signals=carries_signals(text),
        left_window=left_window,
        sends_memory=sends_memory,
        at=NOW,
    )


def followups() -> TurnFollowUps:
    settings = Settings()
    return TurnFollowUps(settings, JobQueue(settings))


def test_extraction_is_queued_from_the_sixth_message_on_when_the_user_states_a_rule() -> None:
    assert Settings().extract_min_messages == 6
    assert jobs_after(5, RULE) == []
    [job] = jobs_after(6, RULE)
    assert isinstance(job, ExtractJob) and job.conversation_id == THREAD.conversation_id


def test_chatter_queues_no_extraction_however_long_the_thread() -> None:
    assert jobs_after(60, "Do you always answer this fast?") == []


def test_a_summary_is_queued_when_messages_left_the_window() -> None:
    [job] = jobs_after(3, "thanks", left_window=True)
    assert isinstance(job, SummarizeJob)


def test_a_thread_that_does_not_send_memory_queues_no_extraction() -> None:
    assert jobs_after(60, RULE, sends_memory=False) == []
    [job] = jobs_after(60, RULE, left_window=True, sends_memory=False)
    assert isinstance(job, SummarizeJob)


def test_a_thread_stamped_with_unread_signals_queues_extraction_after_any_turn() -> None:
    stamped = THREAD.model_copy(update={"signals_at": "2025-01-01T00:00:00.000Z"})
    queued = followups().jobs_after(
        stamped, 6, signals=carries_signals("thanks"), left_window=False, sends_memory=True, at=NOW
    )
    assert [job.kind for job in queued] == [ExtractJob(**IDS).kind]
    assert (
        followups().jobs_after(
            stamped, 5, signals=False, left_window=False, sends_memory=True, at=NOW
        )
        == []
    )


def test_a_stamp_an_extraction_was_refused_for_waits_until_the_cooldown_is_over() -> None:
    # Given a stamped thread whose extraction the cooldown refused, until an hour from now
    waiting = THREAD.model_copy(
        update={"signals_at": "2025-01-01T00:00:00.000Z", "signals_wait_until": LATER}
    )

    def after(at: str, text: str) -> list[AnyJob]:
        return followups().jobs_after(
            waiting, 8, signals=carries_signals(text), left_window=False, sends_memory=True, at=at
        )

    # Then a turn with no signals queues nothing before then, and extraction once it is over
    assert after(NOW, "thanks") == []
    assert [job.kind for job in after(LATER, "thanks")] == [ExtractJob(**IDS).kind]
    # And a turn with signals of its own queues it at once, as ever
    assert [job.kind for job in after(NOW, RULE)] == [ExtractJob(**IDS).kind]
