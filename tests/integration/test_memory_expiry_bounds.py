"""An ``expiresAt`` further ahead than ``MEMORY_EXPIRY_MAX_DAYS`` (up to year 9999, in any
UTC offset) is a 422 naming the field, never a 500 from the TTL arithmetic or from
converting the time to UTC; one within the bound is kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recall.settings import get_settings
from tests.integration.conftest import Api

FAST = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MAX_DAYS = get_settings().memory_expiry_max_days
OFFSETS = st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
).map(lambda offset: timezone(timedelta(minutes=offset // timedelta(minutes=1))))
TOO_FAR = st.datetimes(
    min_value=datetime.now() + timedelta(days=MAX_DAYS + 2),
    max_value=datetime(9999, 12, 31, 23, 59, 59),
    timezones=OFFSETS,
)


def _put(api: Api, project: str, expires_at: str) -> object:
    body = {"value": "Keep the header dark", "category": "brand", "expiresAt": expires_at}
    return api.put(f"/projects/{project}/memories/tone", body)


@FAST
@given(expires_at=TOO_FAR)
@example(expires_at=datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))))
@example(expires_at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
def test_an_expiry_too_far_ahead_is_a_422(
    as_user: Callable[[str | None], Api],
    make_project: Callable[..., str],
    expires_at: datetime,
) -> None:
    # Given an editor's project
    alice = as_user("expiry-bounds-user")
    project = make_project(alice)

    # When they write an entry that expires further ahead than the bound
    reply = _put(alice, project, expires_at.isoformat())

    # Then it is a 422 naming expiresAt
    assert reply.status == 422, (expires_at, reply)
    assert [d["field"] for d in reply.body["error"]["details"]] == ["expiresAt"]


@FAST
@given(days=st.floats(min_value=0.01, max_value=MAX_DAYS - 1), offset=OFFSETS)
def test_an_expiry_within_the_bound_is_kept(
    as_user: Callable[[str | None], Api],
    make_project: Callable[..., str],
    days: float,
    offset: timezone,
) -> None:
    # Given an editor's project
    alice = as_user("expiry-bounds-user")
    project = make_project(alice)

    # When they write an entry that expires within the bound, in any UTC offset
    expires_at = (datetime.now(UTC) + timedelta(days=days)).astimezone(offset)
    reply = _put(alice, project, expires_at.isoformat())

    # Then it is saved with that expiry
    assert reply.status == 201, (expires_at, reply)
    assert datetime.fromisoformat(reply.body["expiresAt"].replace("Z", "+00:00")) <= expires_at
