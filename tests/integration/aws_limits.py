"""DynamoDB's limits on the store's clients, which moto does not enforce, so a request AWS
would refuse fails here too, with the error AWS gives (``ValidationException``; a
transaction's update that would grow an item too large cancels the transaction with a
``ValidationError`` reason, as AWS does):

- key sizes: partition key ≤ 2,048 bytes, sort key ≤ 1,024, for the table's keys and, for
  an item written, its indexes' keys;
- numbers: at most 38 significant digits, zero or magnitude 1e-130 to under 1e126, for
  every ``N`` sent (items, keys, expression values, start keys);
- item size ≤ 400 KB by DynamoDB's size rules, for PutItem, BatchWriteItem's puts, a
  transaction's puts and, for UpdateItem and a transaction's updates, the item the update
  would leave (read from moto with a client of its own);
- TransactWriteItems: at most 100 actions, at most 4 MB in all, one action per item;
- Query: an ``ExclusiveStartKey`` must be a key of the table or index queried and lie
  inside the ``KeyConditionExpression``.

And S3's rules (``S3Limits``): an object key of at most 1,024 bytes of UTF-8
(``KeyTooLongError``), and of a multipart upload, part numbers 1 to 10,000 and every part
but the last at least 5 MiB when the upload is completed (``EntityTooSmall``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
import re
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from local import template

PARTITION_MAX_BYTES = 2_048
SORT_MAX_BYTES = 1_024
ITEM_MAX_BYTES = 400 * 1024
TRANSACTION_MAX_ACTIONS = 100
TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
NUMBER_MAX_DIGITS = 38
NUMBER_MAX = Decimal("9.9999999999999999999999999999999999999E+125")
NUMBER_MIN = Decimal("1E-130")

Item = dict[str, Any]
Reader = Callable[[str, Item], Item | None]

OUTSIDE_QUERY = "The provided starting key is outside query boundaries based on provided conditions"
INVALID_START = (
    "The provided starting key is invalid: The provided key element does not match the schema"
)
ITEM_TOO_LARGE = "Item size has exceeded the maximum allowed size"
UPDATE_TOO_LARGE = "Item size to update has exceeded the maximum allowed size"
ONE_ITEM_TWICE = "Transaction request cannot include multiple operations on one item"
TRANSACTION_TOO_LARGE = "Transaction request size has exceeded the maximum allowed size"


class Schema(NamedTuple):
    """One table or index's keys: ``(partition, sort or None)``."""

    partition: str
    sort: str | None


class TableLimits(NamedTuple):
    keys: dict[str, int]
    items: dict[str, int]
    schema: Schema
    indexes: dict[str, Schema]


def _schema(key_schema: list[dict[str, str]]) -> Schema:
    parts = {part["KeyType"]: part["AttributeName"] for part in key_schema}
    return Schema(parts["HASH"], parts.get("RANGE"))


def _limits(schemas: list[list[dict[str, str]]]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for schema in schemas:
        for part in schema:
            limit = PARTITION_MAX_BYTES if part["KeyType"] == "HASH" else SORT_MAX_BYTES
            limits[part["AttributeName"]] = min(limits.get(part["AttributeName"], limit), limit)
    return limits


def key_limits() -> dict[str, TableLimits]:
    """Each template table's key attributes with their limits, and its key schemas."""
    found = {}
    for request in template.create_table_requests():
        indexes = {
            index["IndexName"]: index["KeySchema"]
            for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")
            for index in request.get(kind, [])
        }
        found[request["TableName"]] = TableLimits(
            _limits([request["KeySchema"]]),
            _limits([request["KeySchema"], *indexes.values()]),
            _schema(request["KeySchema"]),
            {name: _schema(schema) for name, schema in indexes.items()},
        )
    return found


def refused(message: str, operation: str = "DynamoDB") -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, operation)


# --- sizes, by DynamoDB's rules -------------------------------------------------------------


def number_digits(text: str) -> int:
    """Significant digits: leading and trailing zeros do not count."""
    digits = Decimal(text).as_tuple().digits
    return len("".join(map(str, digits)).strip("0")) or 1


def value_size(value: dict[str, Any]) -> int:
    """An attribute value's size; a list or map costs 3 bytes and 1 byte per element."""
    kind, body = next(iter(value.items()))
    if kind == "S":
        return len(body.encode("utf-8"))
    if kind == "N":
        return (number_digits(body) + 1) // 2 + 1
    if kind == "B":
        return len(body)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(part) + 1 for part in body)
    if kind == "M":
        return 3 + sum(
            len(name.encode("utf-8")) + value_size(part) + 1 for name, part in body.items()
        )
    if kind == "SS":
        return sum(len(part.encode("utf-8")) for part in body)
    if kind == "NS":
        return sum((number_digits(part) + 1) // 2 + 1 for part in body)
    if kind == "BS":
        return sum(len(part) for part in body)
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: Item) -> int:
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


# --- numbers ----------------------------------------------------------------------------------


def _values(value: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield value
    kind, body = next(iter(value.items()))
    if kind == "L":
        for part in body:
            yield from _values(part)
    elif kind == "M":
        for part in body.values():
            yield from _values(part)


def _sent(params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every attribute value a request sends, wherever it sits, nested ones too."""

    def of(item: Item) -> Iterator[dict[str, Any]]:
        for value in item.values():
            yield from _values(value)

    for name in ("Item", "Key", "ExpressionAttributeValues", "ExclusiveStartKey"):
        yield from of(params.get(name, {}))
    for action in params.get("TransactItems", []):
        for part in action.values():
            for name in ("Item", "Key", "ExpressionAttributeValues"):
                yield from of(part.get(name, {}))
    for requests in params.get("RequestItems", {}).values():
        if isinstance(requests, dict):
            for key in requests.get("Keys", []):
                yield from of(key)
        else:
            for request in requests:
                for part in request.values():
                    yield from of(part.get("Item", part.get("Key", {})))


def check_value(value: dict[str, Any]) -> None:
    """DynamoDB's refusal of a number it cannot hold or text that is not UTF-8."""
    kind, body = next(iter(value.items()))
    if kind == "N":
        check_number(body)
    elif kind == "NS":
        for number in body:
            check_number(number)
    elif kind in ("S", "SS"):
        for text in [body] if kind == "S" else body:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise refused(
                    "One or more parameter values were invalid: a string is not valid UTF-8"
                ) from exc


def check_number(text: str) -> None:
    """DynamoDB's refusal of a number it cannot hold, if it would refuse it."""
    try:
        number = Decimal(text)
    except InvalidOperation as exc:
        raise refused(f"The parameter cannot be converted to a numeric value: {text}") from exc
    if not number.is_finite():
        raise refused(f"The parameter cannot be converted to a numeric value: {text}")
    if number_digits(text) > NUMBER_MAX_DIGITS:
        raise refused("Attempting to store more than 38 significant digits in a Number")
    if number.copy_abs() > NUMBER_MAX:
        raise refused(
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if number != 0 and number.copy_abs() < NUMBER_MIN:
        raise refused(
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )


# --- keys -----------------------------------------------------------------------------------


def _parts(table: str, part: dict[str, Any]) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    if "Key" in part:
        yield table, False, part["Key"]
    if "Item" in part:
        yield table, True, part["Item"]


def _checked(params: dict[str, Any]) -> Iterator[tuple[str, bool, dict[str, Any]]]:
    """``(table, written, item or key)`` for everything a request names by key."""
    table = str(params.get("TableName", ""))
    yield from _parts(table, params)
    if "ExclusiveStartKey" in params:
        yield table, False, params["ExclusiveStartKey"]
    for action in params.get("TransactItems", []):
        for part in action.values():
            yield from _parts(str(part.get("TableName", "")), part)
    for name, requests in params.get("RequestItems", {}).items():
        if isinstance(requests, dict):
            yield from ((name, False, key) for key in requests.get("Keys", []))
        else:
            for request in requests:
                for part in request.values():
                    yield from _parts(name, part)


def _key_size(value: dict[str, Any]) -> int:
    text = value.get("S")
    return len(text.encode("utf-8")) if isinstance(text, str) else len(value.get("B", b""))


def check_key_sizes(limits: dict[str, TableLimits], params: dict[str, Any]) -> None:
    """DynamoDB's refusal of a key attribute over its limit, and of a query's key value over
    the partition key's."""
    too_large = []
    for table, written, item in _checked(params):
        if table not in limits:
            continue
        bounds = limits[table].items if written else limits[table].keys
        too_large += [
            name for name, value in item.items() if _key_size(value) > bounds.get(name, 2**31)
        ]
    if "KeyConditionExpression" in params:
        values = params.get("ExpressionAttributeValues", {})
        too_large += [
            name for name, value in values.items() if _key_size(value) > PARTITION_MAX_BYTES
        ]
    if too_large:
        raise refused(
            "One or more parameter values were invalid: Size of key "
            f"{too_large} has exceeded the maximum size limit"
        )


# --- updates --------------------------------------------------------------------------------

_CLAUSE = re.compile(r"(?<![#:\w])(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)


def _split(text: str, separator: str = ",") -> list[str]:
    """``text`` split at top-level separators (not inside parentheses)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


class _Update:
    """An update expression applied to a copy of the item, closely enough to size it:
    top-level paths exactly; a nested path counts its whole new value on top."""

    def __init__(self, item: Item, names: dict[str, str], values: Item) -> None:
        self.item = dict(item)
        self.names = names
        self.values = values
        self.extra = 0

    def name(self, path: str) -> tuple[str, bool]:
        """The top-level attribute a path names, and whether the path goes deeper."""
        head = re.split(r"[.\[]", path.strip(), maxsplit=1)[0]
        return self.names.get(head, head), head != path.strip()

    def operand(self, text: str) -> dict[str, Any] | None:
        text = text.strip()
        if text.startswith(":"):
            return dict(self.values[text])
        lowered = text.lower()
        if lowered.startswith("if_not_exists(") and text.endswith(")"):
            path, fallback = _split(text[len("if_not_exists(") : -1])
            return self.operand(path) or self.operand(fallback)
        if lowered.startswith("list_append(") and text.endswith(")"):
            first, second = (self.operand(part) for part in _split(text[len("list_append(") : -1]))
            return {"L": (first or {"L": []})["L"] + (second or {"L": []})["L"]}
        for sign in ("+", "-"):
            sides = _split(text, sign)
            if len(sides) == 2:
                left, right = (self.operand(side) for side in sides)
                try:
                    total = Decimal((left or {"N": "0"})["N"]) + Decimal((right or {"N": "0"})["N"])
                except (KeyError, InvalidOperation):
                    return left or right
                return {"N": str(total)}
        name, nested = self.name(text)
        return None if nested else self.item.get(name)

    def apply(self, expression: str) -> Item:
        pieces = _CLAUSE.split(expression)
        for keyword, body in zip(pieces[1::2], pieces[2::2], strict=True):
            for action in _split(body):
                self.action(keyword.upper(), action)
        return self.item

    def action(self, keyword: str, action: str) -> None:
        if keyword == "SET":
            path, _, value = action.partition("=")
            name, nested = self.name(path)
            new = self.operand(value)
            if new is None:
                return
            if nested:
                self.extra += value_size(new) + len(name.encode("utf-8")) + 1
            else:
                self.item[name] = new
        elif keyword == "REMOVE":
            name, nested = self.name(action)
            if not nested:
                self.item.pop(name, None)
        elif keyword == "ADD":
            path, value = action.split(None, 1)
            name, _ = self.name(path)
            added = self.values[value.strip()]
            old = self.item.get(name)
            if "N" in added:
                total = Decimal(old["N"] if old else "0") + Decimal(added["N"])
                self.item[name] = {"N": str(total)}
            else:
                kind = next(iter(added))
                merged = list(dict.fromkeys([*(old or {kind: []})[kind], *added[kind]]))
                self.item[name] = {kind: merged}


def updated_size(current: Item | None, key: Item, params: dict[str, Any]) -> int:
    """The size of the item an update would leave."""
    update = _Update(
        current or key,
        params.get("ExpressionAttributeNames", {}),
        params.get("ExpressionAttributeValues", {}),
    )
    item = update.apply(params.get("UpdateExpression", ""))
    return item_size(item) + update.extra


# --- queries --------------------------------------------------------------------------------


def _ordered(value: dict[str, Any]) -> Any:
    """A key value as DynamoDB orders it: numbers by value, strings by their UTF-8 bytes,
    binary by its bytes."""
    if "N" in value:
        return Decimal(value["N"])
    if "S" in value:
        return value["S"].encode("utf-8")
    return bytes(value.get("B", b""))


def _compare(value: dict[str, Any], other: dict[str, Any]) -> int:
    left, right = _ordered(value), _ordered(other)
    return int(left > right) - int(left < right)


_OPERATORS: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}
_BETWEEN = re.compile(r"^(\S+)\s+BETWEEN\s+(:\S+)\s+AND\s+(:\S+)$", re.IGNORECASE)
_BEGINS = re.compile(r"^begins_with\s*\(\s*([^,\s]+)\s*,\s*(:\S+?)\s*\)$", re.IGNORECASE)
_COMPARISON = re.compile(r"^(\S+)\s*(<=|>=|=|<|>)\s*(:\S+)$")


def _conditions(expression: str) -> list[str]:
    """A key condition's one or two parts; the AND inside BETWEEN does not split it."""
    parts = re.split(r"\s+AND\s+", expression.strip(), flags=re.IGNORECASE)
    joined: list[str] = []
    for part in parts:
        if joined and re.search(r"\bBETWEEN\s+\S+$", joined[-1], re.IGNORECASE):
            joined[-1] += " AND " + part
        else:
            joined.append(part)
    return joined


def _holds(condition: str, start: Item, names: dict[str, str], values: Item) -> bool:
    def attribute(path: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = start.get(names.get(path, path))
        return found

    if match := _BETWEEN.match(condition):
        found = attribute(match.group(1))
        return found is not None and (
            _compare(found, values[match.group(2)]) >= 0
            and _compare(found, values[match.group(3)]) <= 0
        )
    if match := _BEGINS.match(condition):
        found = attribute(match.group(1))
        prefix = values[match.group(2)]
        return found is not None and "S" in found and found["S"].startswith(prefix["S"])
    if match := _COMPARISON.match(condition):
        found = attribute(match.group(1))
        return found is not None and _OPERATORS[match.group(2)](
            _compare(found, values[match.group(3)])
        )
    raise ValueError(f"key condition this edge does not read: {condition!r}")


def check_start_key(limits: TableLimits, params: dict[str, Any]) -> None:
    """DynamoDB's refusal of a query's start key that is not a key of what it queries, or
    that lies outside its key condition."""
    start = params["ExclusiveStartKey"]
    index = params.get("IndexName")
    schema = limits.indexes[index] if index else limits.schema
    expected = {limits.schema.partition, limits.schema.sort, schema.partition, schema.sort}
    if set(start) != expected - {None}:
        raise refused(INVALID_START)
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    for condition in _conditions(params["KeyConditionExpression"]):
        if not _holds(condition, start, names, values):
            raise refused(OUTSIDE_QUERY)


# --- the edge -------------------------------------------------------------------------------


class AwsLimits:
    """A ``before-parameter-build.dynamodb`` hook: ``reader(table, key)`` reads the current
    item past the hook, so an update can be sized as the item it would leave."""

    def __init__(self, limits: dict[str, TableLimits], reader: Reader) -> None:
        self.limits = limits
        self.reader = reader

    def __call__(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        operation = str(getattr(model, "name", "")) or _operation(params)
        for value in _sent(params):
            check_value(value)
        check_key_sizes(self.limits, params)
        if operation == "PutItem":
            self.check_item(params["Item"])
        elif operation == "UpdateItem":
            self.check_update(params)
        elif operation == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for request in requests:
                    if "PutRequest" in request:
                        self.check_item(request["PutRequest"]["Item"])
        elif operation == "TransactWriteItems":
            self.check_transaction(params)
        elif operation == "Query" and "ExclusiveStartKey" in params:
            table = self.limits.get(str(params.get("TableName", "")))
            if table is not None:
                check_start_key(table, params)

    def check_item(self, item: Item, message: str = ITEM_TOO_LARGE) -> None:
        if item_size(item) > ITEM_MAX_BYTES:
            raise refused(message)

    def check_update(self, params: dict[str, Any]) -> None:
        current = self.reader(str(params["TableName"]), params["Key"])
        if updated_size(current, params["Key"], params) > ITEM_MAX_BYTES:
            raise refused(UPDATE_TOO_LARGE)

    def item_key(self, table: str, item: Item) -> Item:
        schema = self.limits[table].schema if table in self.limits else None
        if schema is None:
            return item
        return {
            name: item[name] for name in (schema.partition, schema.sort) if name and name in item
        }

    def check_transaction(self, params: dict[str, Any]) -> None:
        actions = params["TransactItems"]
        if len(actions) > TRANSACTION_MAX_ACTIONS:
            raise refused(
                "1 validation error detected: Value at 'transactItems' failed to satisfy "
                "constraint: Member must have length less than or equal to 100"
            )
        seen: set[tuple[str, str]] = set()
        total = 0
        for action in actions:
            ((kind, part),) = action.items()
            table = str(part["TableName"])
            key = self.item_key(table, part["Item"]) if kind == "Put" else part["Key"]
            identity = (table, repr(sorted((name, repr(value)) for name, value in key.items())))
            if identity in seen:
                raise refused(ONE_ITEM_TWICE)
            seen.add(identity)
            if kind == "Put":
                self.check_item(part["Item"])
                total += item_size(part["Item"])
            else:
                total += item_size(key) + item_size(part.get("ExpressionAttributeValues", {}))
        if total > TRANSACTION_MAX_BYTES:
            raise refused(TRANSACTION_TOO_LARGE)
        reasons: list[Any] = [{"Code": "None"} for _ in actions]
        for at, action in enumerate(actions):
            if "Update" in action:
                part = action["Update"]
                current = self.reader(str(part["TableName"]), part["Key"])
                if updated_size(current, part["Key"], part) > ITEM_MAX_BYTES:
                    reasons[at] = {"Code": "ValidationError", "Message": UPDATE_TOO_LARGE}
                    raise ClientError(
                        {
                            "Error": {
                                "Code": "TransactionCanceledException",
                                "Message": "Transaction cancelled, please refer cancellation "
                                "reasons for specific reasons "
                                f"[{', '.join(r['Code'] for r in reasons)}]",
                            },
                            "CancellationReasons": reasons,
                        },
                        "TransactWriteItems",
                    )


def _operation(params: dict[str, Any]) -> str:
    """The operation a request is, when the hook is called without its model (unit tests)."""
    if "TransactItems" in params:
        return "TransactWriteItems"
    if "RequestItems" in params:
        return "BatchWriteItem"
    if "KeyConditionExpression" in params:
        return "Query"
    if "UpdateExpression" in params:
        return "UpdateItem"
    if "Item" in params:
        return "PutItem"
    return ""


# --- S3's multipart uploads -----------------------------------------------------------------

PART_MIN_BYTES = 5 * 1024 * 1024
PART_NUMBER_MAX = 10_000
OBJECT_KEY_MAX_BYTES = 1_024


class S3Limits:
    """A ``before-parameter-build.s3`` hook: refuses what S3 refuses of an object's key and
    of a multipart upload, and keeps each upload's part sizes, in the order sent, for tests
    to read."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[int, int]] = {}

    def __call__(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        operation = str(getattr(model, "name", ""))
        if len(str(params.get("Key", "")).encode()) > OBJECT_KEY_MAX_BYTES:
            raise ClientError(
                {"Error": {"Code": "KeyTooLongError", "Message": "Your key is too long"}},
                operation,
            )
        if operation == "UploadPart":
            number = int(params["PartNumber"])
            if not 1 <= number <= PART_NUMBER_MAX:
                raise ClientError(
                    {
                        "Error": {
                            "Code": "InvalidArgument",
                            "Message": "Part number must be an integer between 1 and 10000",
                        }
                    },
                    operation,
                )
            self.parts.setdefault(str(params["UploadId"]), {})[number] = _length(params["Body"])
        elif operation == "CompleteMultipartUpload":
            sizes = self.parts.get(str(params["UploadId"]), {})
            numbers = [part["PartNumber"] for part in params["MultipartUpload"]["Parts"]]
            if any(sizes.get(number, 0) < PART_MIN_BYTES for number in numbers[:-1]):
                raise ClientError(
                    {
                        "Error": {
                            "Code": "EntityTooSmall",
                            "Message": "Your proposed upload is smaller than the minimum "
                            "allowed object size.",
                        }
                    },
                    operation,
                )

    def sizes(self) -> list[list[int]]:
        """Each upload's part sizes, by part number."""
        return [[found[number] for number in sorted(found)] for found in self.parts.values()]


def _length(body: Any) -> int:
    """A part's size, whether botocore still holds it as bytes or as a file by now."""
    if isinstance(body, bytes | bytearray):
        return len(body)
    here = body.tell()
    size = int(body.seek(0, 2))
    body.seek(here)
    return size
