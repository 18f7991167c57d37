"""The API's timestamp format: ISO-8601 UTC with milliseconds, always sortable as text
and always readable back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from recall.domain.clock import parse, stamp


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC), "0999-12-31T23:59:59.000Z"),
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000Z"),
        (datetime(2025, 3, 1, 9, 0, 0, 123_456, tzinfo=UTC), "2025-03-01T09:00:00.123Z"),
        (
            datetime(2025, 3, 1, 9, 0, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
            "2025-03-02T08:59:00.000Z",
        ),
    ],
)
def test_a_stamp_has_a_four_digit_year_and_parses_back(moment: datetime, text: str) -> None:
    # When
    written = stamp(moment)
    # Then
    assert written == text
    assert parse(written) == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def test_stamps_of_any_year_sort_as_their_times_do() -> None:
    # Given
    moments = [datetime(year, 6, 1, tzinfo=UTC) for year in (2025, 999, 1970, 10, 1000)]
    # When
    texts = [stamp(moment) for moment in moments]
    # Then
    assert sorted(texts) == [stamp(moment) for moment in sorted(moments)]
