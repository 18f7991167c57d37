"""A cancelled transaction is read by its reasons, item by item: only failed conditions and
competing transactions are a conflict, throttling is a 429, and anything else (a
``ValidationError``: a request DynamoDB refused) is raised as it is, never a false 409."""

from __future__ import annotations

from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from recall.errors import Conflict, Throttled
from recall.store.dynamodb import translate

CONFLICTS = ["ConditionalCheckFailed", "TransactionConflict"]
OTHERS = ["ValidationError", "ItemCollectionSizeLimitExceeded"]
THROTTLED = ["ThrottlingError", "ProvisionedThroughputExceeded"]


def _cancelled(codes: list[str]) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


@settings(max_examples=100)
@given(codes=st.lists(st.sampled_from(["None", *CONFLICTS, *OTHERS, *THROTTLED]), max_size=5))
def test_cancellation_reasons_are_read_exactly(codes: list[str]) -> None:
    # Given a transaction cancelled for these reasons
    exc = _cancelled(codes)

    # When it is translated
    error = translate(exc)

    # Then throttling is Throttled, a refused request is raised as is, conflicts are Conflict
    if set(codes) & set(THROTTLED):
        assert isinstance(error, Throttled)
    elif set(codes) & set(OTHERS):
        assert error is exc
    elif set(codes) & set(CONFLICTS) or not codes:
        assert isinstance(error, Conflict)
    else:
        assert error is exc


def _refused(code: str, status: int) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": "refused"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "Operation",
    )


def test_a_transaction_that_only_met_another_is_a_conflict_that_says_when_to_retry() -> None:
    # Given DynamoDB cancelled it because another transaction held an item at that moment
    met = translate(_cancelled(["None", "TransactionConflict", "None"]))
    # Then it is a 409 with Retry-After, unlike a condition that failed for good
    failed = translate(_cancelled(["ConditionalCheckFailed", "TransactionConflict"]))
    assert isinstance(met, Conflict) and met.retry_after is not None
    assert isinstance(failed, Conflict) and failed.retry_after is None
    single = translate(_refused("TransactionConflictException", 400))
    assert isinstance(single, Conflict) and single.retry_after is not None
