"""A summary job folds at most SUMMARY_FOLD_MAX_MESSAGES of what left the window, saves
that, and queues the thread's next fold for the rest, over the embedded DynamoDB."""

from __future__ import annotations

import pytest

from recall.domain.jobs import SummarizeJob
from tests.integration.test_background_jobs import NOW, Recall, chatter, window_of


@pytest.mark.parametrize(
    ("most", "leaving"),
    [(200, 201), (200, 250), (20, 21)],
    ids=["201 of the seeds' 200", "250 of the seeds' 200", "21 of 20"],
)
def test_a_summary_job_folds_at_most_its_bound_and_queues_the_next_fold(
    most: int, leaving: int
) -> None:
    # Given SUMMARY_FOLD_MAX_MESSAGES, and a thread of which more than that left the window
    recall = Recall(summary_fold_max_messages=most)
    thread = recall.thread([*chatter(leaving), "hello", "hi"])
    window_of(recall, thread, 2)
    ids = (recall.user, recall.project, thread.conversation_id)
    left = recall.messages.latest_after(*ids, None, leaving + 2)[:leaving]
    job = SummarizeJob(
        user_id=recall.user, project_id=recall.project, conversation_id=thread.conversation_id
    )
    # When the job runs
    first = recall.summaries.run(job, NOW)
    # Then it folded the oldest `most` of them, saved that, and queued the next fold
    assert first.folded == most
    saved = recall.conversations.get(*ids)
    assert saved is not None and saved.summary_through == left[most - 1].message_id
    assert recall.queue.jobs == [job]
    # When the queued fold runs
    second = recall.summaries.run(recall.queue.jobs.pop(), NOW)
    # Then it folded the rest, up to the window, and queued nothing more
    assert second.folded == leaving - most
    done = recall.conversations.get(*ids)
    assert done is not None and done.summary_through == left[-1].message_id
    assert recall.queue.jobs == []
