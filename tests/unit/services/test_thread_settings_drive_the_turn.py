"""A thread's own settings shape its turns: the window the model sees and the summary job
that follows (none for a thread that uses no summary)."""

from __future__ import annotations

import pytest

from recall.domain.access import Role
from recall.domain.jobs import SummarizeJob
from recall.domain.presets import KEEP
from recall.providers.offline import OfflineProvider
from recall.settings import Settings
from tests.unit.services.in_memory import InMemoryRecall

ALICE = "alice"


def talk(recall: InMemoryRecall, summary: bool | None) -> str:
    project = recall.projects.add(ALICE, {})
    thread = recall.conversation_service.create(ALICE, project, None).conversation_id
    if summary is not None:
        recall.conversation_service.update(
            ALICE, project, thread, None, None, {"use_summary": summary}
        )
    for text in ("one", "two", "three"):
        recall.chat_service.turn(ALICE, project, text, thread, None)
    return project


@pytest.mark.parametrize(("summary", "queued"), [(None, True), (True, True), (False, False)])
def test_a_summary_job_is_queued_only_for_threads_that_use_the_summary(
    summary: bool | None, queued: bool
) -> None:
    recall = InMemoryRecall(
        settings=Settings(window_messages=2, window_evict_step=0), model=OfflineProvider()
    )
    talk(recall, summary)
    assert any(isinstance(job, SummarizeJob) for job in recall.jobs.sent) is queued


def test_a_thread_window_setting_sizes_what_the_model_sees() -> None:
    recall = InMemoryRecall(settings=Settings(window_evict_step=0), model=OfflineProvider())
    project = recall.projects.add(ALICE, {"bob": Role.VIEWER})
    thread = recall.conversation_service.create(ALICE, project, None).conversation_id
    recall.conversation_service.update(
        ALICE, project, thread, None, None, {"window_messages": 3, "use_summary": False}
    )
    for text in ("one", "two", "three"):
        recall.chat_service.turn(ALICE, project, text, thread, None)
    context, _, _, settings = recall.context_service.preview(ALICE, project, thread)
    assert settings.window_messages == 3
    assert len(context.window) == 3
    # titles and archive flags change without touching the overrides
    kept = recall.conversation_service.update(ALICE, project, thread, "Renamed", None, KEEP)
    assert kept.settings is not None and kept.settings.window_messages == 3
