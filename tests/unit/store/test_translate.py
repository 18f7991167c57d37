"""A cancelled transaction is read by its reasons, item by item: only failed conditions and
competing transactions are a conflict, throttling is a 429, and anything else (a
``ValidationError``: a request DynamoDB refused) is raised as it is, never a false 409.
Any other service's throttling and passing faults are faults to retry, not bugs."""

from __future__ import annotations

from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from recall.errors import Conflict, Throttled, Unavailable
from recall.store.dynamodb import fault_of, translate

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


# Each service's own word for "slow down", as it comes after botocore's retries ran out.
OTHER_SERVICES_THROTTLING = [
    ("SQS", "RequestThrottled", 400),
    ("Lambda", "TooManyRequestsException", 429),
    ("KMS", "ThrottlingException", 400),
    ("EC2-style", "RequestLimitExceeded", 400),
    ("S3", "SlowDown", 503),
]


@pytest.mark.parametrize(
    ("code", "status"),
    [(code, status) for _, code, status in OTHER_SERVICES_THROTTLING],
    ids=[service for service, _, _ in OTHER_SERVICES_THROTTLING],
)
def test_any_services_throttling_is_a_fault_to_retry_not_a_bug(code: str, status: int) -> None:
    assert isinstance(fault_of(_refused(code, status)), Throttled)


def test_any_services_passing_fault_is_unavailable_and_a_refusal_is_still_a_bug() -> None:
    assert isinstance(fault_of(_refused("InternalError", 500)), Unavailable)
    assert isinstance(fault_of(_refused("PriorRequestNotComplete", 400)), Throttled)
    assert isinstance(fault_of(_refused("RequestTimeout", 400)), Unavailable)
    assert fault_of(_refused("AccessDeniedException", 400)) is None
    assert fault_of(_refused("InvalidParameterValue", 400)) is None
