"""Which jobs a turn leaves for the worker."""

from __future__ import annotations

from recall.domain.conversations import Conversation
from recall.domain.jobs import ExtractJob, SummarizeJob
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


def followups() -> TurnFollowUps:
    settings = Settings()
    return TurnFollowUps(settings, JobQueue(settings))


def test_extraction_is_queued_from_the_sixth_message_on_when_the_user_states_a_rule() -> None:
    assert Settings().extract_min_messages == 6
    assert followups().jobs_after(THREAD, 5, RULE, False) == []
    [job] = followups().jobs_after(THREAD, 6, RULE, False)
    assert isinstance(job, ExtractJob) and job.conversation_id == THREAD.conversation_id


def test_chatter_queues_no_extraction_however_long_the_thread() -> None:
    assert followups().jobs_after(THREAD, 60, "Do you always answer this fast?", False) == []


def test_a_summary_is_queued_when_messages_left_the_window() -> None:
    [job] = followups().jobs_after(THREAD, 3, "thanks", True)
    assert isinstance(job, SummarizeJob)
