"""Settings that only work together: what an export answers inline must import back, and
an import is taken up again only after the queue gave up on its chunk."""

from __future__ import annotations

from pydantic import ValidationError
import pytest

from local import template
from recall.settings import Settings


def test_an_export_answered_inline_fits_an_import_body_by_default() -> None:
    # When
    settings = Settings()
    # Then
    assert settings.export_max_bytes <= settings.import_max_bytes


def test_an_inline_export_larger_than_an_import_body_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given
    monkeypatch.setenv("EXPORT_MAX_BYTES", "6000000")
    monkeypatch.setenv("IMPORT_MAX_BYTES", "5500000")
    # When / Then
    with pytest.raises(ValidationError, match="EXPORT_MAX_BYTES must not exceed IMPORT_MAX_BYTES"):
        Settings()


def test_an_import_is_not_taken_up_again_while_the_queue_still_retries_its_chunk() -> None:
    # Given the jobs queue as the template declares it
    queue = template.resources("AWS::SQS::Queue")["MemoryJobsQueue"]["Properties"]
    retrying = queue["VisibilityTimeout"] * queue["RedrivePolicy"]["maxReceiveCount"]
    # When / Then an import counts as stalled only once its job has been dead-lettered
    assert Settings().import_stall_seconds > retrying
