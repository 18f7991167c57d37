"""The integration tests' DynamoDB edge refuses what AWS refuses, and only that: each rule
once with a request AWS takes and once with one it refuses."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
import pytest

from tests.integration.aws_limits import (
    INVALID_START,
    ITEM_MAX_BYTES,
    ITEM_TOO_LARGE,
    ONE_ITEM_TWICE,
    OUTSIDE_QUERY,
    UPDATE_TOO_LARGE,
    AwsLimits,
    item_size,
    key_limits,
)

Item = dict[str, Any]


def s(text: str) -> Item:
    return {"S": text}


def n(text: str) -> Item:
    return {"N": text}


def edge(stored: dict[tuple[str, str], Item] | None = None) -> AwsLimits:
    """The edge over a fake store: ``stored`` maps ``(table, partition value)`` to items."""

    def read(table: str, key: Item) -> Item | None:
        return (stored or {}).get((table, next(iter(key.values()))["S"]))

    return AwsLimits(key_limits(), read)


def refusal(params: Item, stored: dict[tuple[str, str], Item] | None = None) -> str:
    with pytest.raises(ClientError) as caught:
        edge(stored)(params)
    error = caught.value.response["Error"]
    if error["Code"] == "TransactionCanceledException":
        reasons = caught.value.response["CancellationReasons"]
        return str(next(r["Message"] for r in reasons if r["Code"] != "None"))
    assert error["Code"] == "ValidationException"
    return str(error["Message"])


def session(window_text: str) -> Item:
    return {"thread": s("u#p#c"), "window": {"L": [{"M": {"content": s(window_text)}}]}}


# --- sizes ----------------------------------------------------------------------------------


def test_item_size_follows_dynamodbs_rules() -> None:
    assert item_size({"ab": s("é")}) == 2 + 2  # name + UTF-8 bytes
    assert item_size({"n": n("12345")}) == 1 + 3 + 1  # 1 byte per two digits, + 1
    assert item_size({"n": n("1000")}) == 1 + 1 + 1  # trailing zeros do not count
    assert item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_size({"l": {"L": [s("ab"), s("c")]}}) == 1 + 3 + (2 + 1) + (1 + 1)
    assert item_size({"m": {"M": {"k": s("v")}}}) == 1 + 3 + (1 + 1 + 1)


def test_an_item_over_400_kb_is_refused_and_one_at_the_limit_is_not() -> None:
    name_and_key = item_size({"thread": s("t"), "c": s("")})
    fits = {"thread": s("t"), "c": s("x" * (ITEM_MAX_BYTES - name_and_key))}
    edge()({"TableName": "SessionsTable", "Item": fits})
    over = {"thread": s("t"), "c": s("x" * (ITEM_MAX_BYTES - name_and_key + 1))}
    assert refusal({"TableName": "SessionsTable", "Item": over}) == ITEM_TOO_LARGE


def test_four_byte_characters_count_four_bytes() -> None:
    item = {"thread": s("t"), "c": s("\U0001f600" * (ITEM_MAX_BYTES // 4))}
    assert refusal({"TableName": "SessionsTable", "Item": item}) == ITEM_TOO_LARGE


def test_a_batch_put_over_400_kb_is_refused() -> None:
    item = {"thread": s("t"), "messageId": s("m"), "c": s("x" * ITEM_MAX_BYTES)}
    params = {"RequestItems": {"MessagesTable": [{"PutRequest": {"Item": item}}]}}
    assert refusal(params) == ITEM_TOO_LARGE


def test_an_update_is_sized_as_the_item_it_would_leave() -> None:
    stored = {("SessionsTable", "t"): {"thread": s("t"), "old": s("x" * 300_000)}}
    update = {
        "TableName": "SessionsTable",
        "Key": {"thread": s("t")},
        "UpdateExpression": "SET #new = :new",
        "ExpressionAttributeNames": {"#new": "new"},
        "ExpressionAttributeValues": {":new": s("y" * 200_000)},
    }
    assert refusal(update, stored) == UPDATE_TOO_LARGE
    replacing = {**update, "ExpressionAttributeNames": {"#new": "old"}}
    edge(stored)(replacing)  # replaces the old value: 200 KB
    removing = {**update, "UpdateExpression": "SET #new = :new REMOVE #old"}
    edge(stored)({**removing, "ExpressionAttributeNames": {"#new": "new", "#old": "old"}})


def test_a_transaction_update_that_would_grow_an_item_past_400_kb_cancels_it() -> None:
    stored = {("SessionsTable", "t"): {"thread": s("t"), "old": s("x" * 300_000)}}
    update = {
        "TableName": "SessionsTable",
        "Key": {"thread": s("t")},
        "UpdateExpression": "SET #new = if_not_exists(#new, :new)",
        "ExpressionAttributeNames": {"#new": "new"},
        "ExpressionAttributeValues": {":new": s("y" * 200_000)},
    }
    assert refusal({"TransactItems": [{"Update": update}]}, stored) == UPDATE_TOO_LARGE


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "message"),
    [
        ("1" * 39, "more than 38 significant digits"),
        ("1E+126", "Number overflow"),
        ("-1E+126", "Number overflow"),
        ("1E-131", "Number underflow"),
        ("NaN", "cannot be converted"),
        ("Infinity", "cannot be converted"),
    ],
)
def test_a_number_dynamodb_cannot_hold_is_refused_wherever_it_is_sent(
    number: str, message: str
) -> None:
    item = {"projectId": s("p"), "sk": s("PROJECT"), "context": {"M": {"x": n(number)}}}
    assert message in refusal({"TableName": "ProjectsTable", "Item": item})
    update = {
        "TableName": "ProjectsTable",
        "Key": {"projectId": s("p"), "sk": s("PROJECT")},
        "UpdateExpression": "SET #c = :c",
        "ExpressionAttributeNames": {"#c": "context"},
        "ExpressionAttributeValues": {":c": {"L": [n(number)]}},
    }
    assert message in refusal({"TransactItems": [{"Update": update}]})


@pytest.mark.parametrize(
    "number",
    [
        "0",
        "1" * 38,
        "1" + "0" * 60,
        "9.9999999999999999999999999999999999999E+125",
        "1E-130",
        "-1E-130",
    ],
)
def test_a_number_in_range_is_taken(number: str) -> None:
    item = {"projectId": s("p"), "sk": s("PROJECT"), "count": n(number)}
    edge()({"TableName": "ProjectsTable", "Item": item})


# --- transactions ---------------------------------------------------------------------------


def put(thread: str, message_id: str) -> Item:
    item = {"thread": s(thread), "messageId": s(message_id)}
    return {"Put": {"TableName": "MessagesTable", "Item": item}}


def test_a_transaction_of_more_than_100_actions_is_refused() -> None:
    edge()({"TransactItems": [put("t", f"m{i}") for i in range(100)]})
    assert "less than or equal to 100" in refusal(
        {"TransactItems": [put("t", f"m{i}") for i in range(101)]}
    )


def test_a_transaction_naming_one_item_twice_is_refused() -> None:
    update = {
        "Update": {
            "TableName": "MessagesTable",
            "Key": {"thread": s("t"), "messageId": s("m1")},
            "UpdateExpression": "SET #a = :a",
            "ExpressionAttributeNames": {"#a": "a"},
            "ExpressionAttributeValues": {":a": s("x")},
        }
    }
    edge()({"TransactItems": [put("t", "m1"), put("t", "m2"), put("u", "m1")]})
    assert refusal({"TransactItems": [put("t", "m1"), update]}) == ONE_ITEM_TWICE


def test_a_transaction_over_4_mb_is_refused() -> None:
    big = "x" * 390_000
    items = [put("t", f"m{i}") for i in range(11)]
    for action in items:
        action["Put"]["Item"]["c"] = s(big)
    assert "size has exceeded" in refusal({"TransactItems": items})


# --- query start keys -----------------------------------------------------------------------


def messages_query(start: Item, condition: str = "#t = :t", **values: Item) -> Item:
    return {
        "TableName": "MessagesTable",
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": {"#t": "thread", "#id": "messageId"},
        "ExpressionAttributeValues": {":t": s("thread-a"), **values},
        "ExclusiveStartKey": start,
    }


def test_a_start_key_in_another_partition_is_outside_the_query() -> None:
    edge()(messages_query({"thread": s("thread-a"), "messageId": s("m")}))
    assert refusal(messages_query({"thread": s("thread-b"), "messageId": s("m")})) == OUTSIDE_QUERY


def test_a_start_key_outside_the_sort_key_condition_is_refused() -> None:
    start = {"thread": s("thread-a"), "messageId": s("B")}
    edge()(messages_query(start, "#t = :t AND #id > :a", **{":a": s("A")}))
    assert refusal(messages_query(start, "#t = :t AND #id > :a", **{":a": s("C")})) == OUTSIDE_QUERY
    between = "#t = :t AND #id BETWEEN :a AND :b"
    edge()(messages_query(start, between, **{":a": s("A"), ":b": s("C")}))
    assert refusal(messages_query(start, between, **{":a": s("C"), ":b": s("D")})) == OUTSIDE_QUERY
    begins = "#t = :t AND begins_with(#id, :p)"
    edge()(messages_query(start, begins, **{":p": s("B")}))
    assert refusal(messages_query(start, begins, **{":p": s("A")})) == OUTSIDE_QUERY


def test_a_start_key_without_the_index_keys_is_invalid() -> None:
    query = {
        "TableName": "ProjectsTable",
        "IndexName": "byMember",
        "KeyConditionExpression": "#m = :m",
        "ExpressionAttributeNames": {"#m": "memberId"},
        "ExpressionAttributeValues": {":m": s("alice")},
    }
    full = {"projectId": s("p"), "sk": s("MEMBER#alice"), "memberId": s("alice")}
    edge()({**query, "ExclusiveStartKey": full})
    partial = {"projectId": s("p"), "sk": s("MEMBER#alice")}
    assert refusal({**query, "ExclusiveStartKey": partial}) == INVALID_START


def test_a_key_over_its_size_limit_is_refused() -> None:
    item = {"thread": s("t" * 2_049), "messageId": s("m")}
    assert "Size of key" in refusal({"TableName": "MessagesTable", "Item": item})


def test_text_that_is_not_utf_8_is_refused() -> None:
    item = {"thread": s("t"), "messageId": s("m"), "content": s("half a pair \ud83d")}
    assert "UTF-8" in refusal({"TableName": "MessagesTable", "Item": item})
