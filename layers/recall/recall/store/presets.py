"""Presets, in the Projects table under their project's partition: one item per preset
(``sk = PRESET#<presetId>``), next to the project item whose ``presetCount`` bounds how
many there are. Every write is a transaction with a check that the caller may still edit,
and a create or delete moves the count in the same transaction, so the bound holds under
concurrent writers and a project being deleted takes no new preset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import Field

from recall.domain.access import Role
from recall.domain.presets import Preset
from recall.errors import Conflict, Forbidden, NotFound
from recall.settings import Settings
from recall.store.dynamodb import (
    Item,
    StoredItem,
    batch_delete,
    cancellation_codes,
    dynamodb_client,
    from_item,
    to_item,
    to_value,
    translate,
)
from recall.store.project_items import ROLE_LOST, project_key
from recall.store.projects import ProjectStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PRESET_PREFIX = "PRESET#"
_FAILED = "ConditionalCheckFailed"


def preset_key(project_id: str, preset_id: str) -> Item:
    return to_item({"projectId": project_id, "sk": PRESET_PREFIX + preset_id})


def is_preset_item(values: dict[str, Any]) -> bool:
    return str(values.get("sk", "")).startswith(PRESET_PREFIX)


class PresetItem(StoredItem, Preset):
    """A preset as stored, under ``sk = PRESET#<presetId>``: its id is in its key only."""

    sk: str
    preset_id: str = Field(default="", exclude=True)

    @classmethod
    def of(cls, preset: Preset) -> PresetItem:
        return cls.model_validate({**preset.model_dump(), "sk": PRESET_PREFIX + preset.preset_id})

    def preset(self) -> Preset:
        return Preset.model_validate(
            {
                **self.model_dump(include=set(Preset.model_fields)),
                "preset_id": self.sk.removeprefix(PRESET_PREFIX),
            }
        )


def preset_from(item: Item) -> Preset:
    return PresetItem.model_validate(from_item(item)).preset()


class PresetStore:
    def __init__(
        self, settings: Settings, projects: ProjectStore, client: DynamoDBClient | None = None
    ) -> None:
        self._table = settings.projects_table
        self._projects = projects
        self._client = client
        self._max = settings.presets_max
        self._batch_attempts = settings.batch_retry_attempts
        self._batch_base_seconds = settings.batch_retry_base_seconds

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def get(self, project_id: str, preset_id: str) -> Preset | None:
        item = self.client.get_item(
            TableName=self._table, Key=preset_key(project_id, preset_id), ConsistentRead=True
        ).get("Item")
        return preset_from(item) if item else None

    def all(self, project_id: str) -> list[Preset]:
        """The project's presets, in the order they were made (their ids sort by time)."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": "projectId", "#sk": "sk"},
            ExpressionAttributeValues={
                ":pk": to_value(project_id),
                ":prefix": to_value(PRESET_PREFIX),
            },
            ConsistentRead=True,
        )
        return [preset_from(item) for page in pages for item in page["Items"]]

    def create(self, preset: Preset, caller_id: str) -> None:
        """The preset, one more on the project's count (Conflict at ``PRESETS_MAX``)."""
        count = self._count_request(
            preset.project_id,
            "ADD #count :one",
            "attribute_exists(#pk) AND attribute_not_exists(#erasing)"
            " AND (attribute_not_exists(#count) OR #count < :max)",
            {":one": to_value(1), ":max": to_value(self._max)},
        )
        put = {
            "Put": {
                "TableName": self._table,
                "Item": PresetItem.of(preset).item(),
                "ConditionExpression": "attribute_not_exists(#sk)",
                "ExpressionAttributeNames": {"#sk": "sk"},
            }
        }
        self._write(preset.project_id, caller_id, [put, count], full=True)

    def replace(self, preset: Preset, caller_id: str) -> None:
        put = {
            "Put": {
                "TableName": self._table,
                "Item": PresetItem.of(preset).item(),
                "ConditionExpression": "attribute_exists(#sk)",
                "ExpressionAttributeNames": {"#sk": "sk"},
            }
        }
        self._write(preset.project_id, caller_id, [put])

    def delete(self, project_id: str, preset_id: str, caller_id: str) -> None:
        delete = {
            "Delete": {
                "TableName": self._table,
                "Key": preset_key(project_id, preset_id),
                "ConditionExpression": "attribute_exists(#sk)",
                "ExpressionAttributeNames": {"#sk": "sk"},
            }
        }
        count = self._count_request(
            project_id, "ADD #count :minus", "attribute_exists(#pk)", {":minus": to_value(-1)}
        )
        self._write(project_id, caller_id, [delete, count])

    def erase(self, project_id: str) -> int:
        """Every preset of a project being deleted (the project item, and its count, go
        after); how many were deleted."""
        keys = [preset_key(project_id, preset.preset_id) for preset in self.all(project_id)]
        return batch_delete(
            self.client,
            self._table,
            keys,
            attempts=self._batch_attempts,
            base_seconds=self._batch_base_seconds,
        )

    def _count_request(
        self, project_id: str, update: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any]:
        names = {"#count": "presetCount", "#pk": "projectId"}
        if "#erasing" in condition:
            names["#erasing"] = "erasing"
        return {
            "Update": {
                "TableName": self._table,
                "Key": project_key(project_id),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _write(
        self, project_id: str, caller_id: str, items: list[Any], *, full: bool = False
    ) -> None:
        """``items`` and the caller's editor check, as one transaction; a failed condition
        is read by position: the preset (404, or 409 for a create), the count (409 when
        ``full``), the caller's role (403)."""
        check: Any = {
            "ConditionCheck": self._projects.role_check(project_id, caller_id, Role.EDITOR)
        }
        try:
            self.client.transact_write_items(TransactItems=[*items, check])
        except ClientError as exc:
            codes = cancellation_codes(exc)
            if len(codes) > len(items) and codes[len(items)] == _FAILED:
                raise Forbidden(ROLE_LOST) from exc
            if codes and codes[0] == _FAILED:
                if full:
                    raise Conflict("A preset with this id already exists.") from exc
                raise NotFound("No such preset.") from exc
            if full and len(codes) > 1 and codes[1] == _FAILED:
                raise Conflict(
                    f"A project has at most {self._max} presets; delete one first."
                ) from exc
            raise translate(exc, "The preset changed meanwhile; try again.") from exc
