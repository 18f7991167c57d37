"""Project context numbers DynamoDB cannot store (infinite, over 38 significant digits,
magnitude outside 1e-130 to under 1e126) are a 422 naming the attribute, on create and on
update, never a 500 from the store or a 409 read from a cancelled transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import Api

FAST = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DIGIT = st.sampled_from("123456789")
# Numbers JSON reads as infinite (NaN and Infinity themselves are no JSON: a 400).
NOT_FINITE = st.sampled_from(["1e400", "-1e400"])
TOO_MANY_DIGITS = st.tuples(DIGIT, st.text("0123456789", min_size=37, max_size=400), DIGIT).map(
    "".join
)
OUT_OF_RANGE = st.tuples(
    st.sampled_from(["", "-"]),
    DIGIT,
    st.integers(126, 400) | st.integers(-320, -131),  # below, JSON reads 0.0
).map(lambda parts: f"{parts[0]}{parts[1]}e{parts[2]}")
UNSTORABLE = NOT_FINITE | TOO_MANY_DIGITS | OUT_OF_RANGE
STORABLE = st.one_of(
    st.integers(-(10**38) + 1, 10**38 - 1).map(str),
    st.tuples(DIGIT, st.integers(0, 87)).map(lambda parts: parts[0] + "0" * parts[1]),
    st.tuples(st.sampled_from(["", "-"]), DIGIT, st.integers(-130, 125)).map(
        lambda parts: f"{parts[0]}{parts[1]}e{parts[2]}"
    ),
)


def _create(api: Api, number: str) -> Any:
    body = '{"name": "Corner Shop", "context": {"itemCount": ' + number + "}}"
    return api.post("/projects", body)


@FAST
@given(number=UNSTORABLE)
@example(number="1e300")
@example(number="-1e400")
@example(number="1e-200")
@example(number="1" * 400)
def test_a_number_dynamodb_cannot_store_is_a_422_naming_it(
    as_user: Callable[[str | None], Api], number: str
) -> None:
    # Given a caller and a project they own
    alice = as_user("context-numbers-user")

    # When a project is created, or updated, with that number in its context
    created = _create(alice, number)
    project = _create(alice, "1").body["id"]
    updated = alice.patch(f"/projects/{project}", '{"context": {"itemCount": ' + number + "}}")

    # Then both are a 422 that names the attribute
    for reply in (created, updated):
        assert reply.status == 422, (number, reply)
        assert [d["field"] for d in reply.body["error"]["details"]] == ["context.itemCount"]


@FAST
@given(number=STORABLE)
@example(number="1e125")
@example(number="-1e-130")
@example(number="9" * 38)
def test_a_number_dynamodb_can_store_is_kept(
    as_user: Callable[[str | None], Api], number: str
) -> None:
    # Given a caller
    alice = as_user("context-numbers-user")

    # When a project is created with a number DynamoDB can hold
    created = _create(alice, number)

    # Then it is saved and read back as the same number
    assert created.status == 201, (number, created)
    read = alice.get(f"/projects/{created.body['id']}")
    assert float(read.body["context"]["itemCount"]) == float(number)
