"""``make dev``'s snapshot, saved before a table's keys changed, still loads: an item
without its table's current keys (an idempotency record from before records were kept
under their caller's user and project) is left out, and everything else comes back."""

from __future__ import annotations

import json
from pathlib import Path
import uuid

from local import embedded
from local.snapshot import FORMAT, SNAPSHOT_FILE, Snapshots
from recall.settings import get_settings
from recall.wiring import project_store


def test_an_item_keyed_for_an_older_schema_is_left_out_and_the_rest_restored(
    tmp_path: Path, embedded_store: embedded.EmbeddedStore
) -> None:
    # Given a snapshot holding a project and an idempotency record keyed by `id` alone
    settings = get_settings()
    project_id = f"01SNAPSHOT{uuid.uuid4().hex[:16].upper()}"
    project = {
        "projectId": {"S": project_id},
        "sk": {"S": "PROJECT"},
        "name": {"S": "Kept"},
        "ownerCount": {"N": "1"},
        "createdBy": {"S": "someone"},
        "createdAt": {"S": "2026-01-01T00:00:00.000000Z"},
        "updatedAt": {"S": "2026-01-01T00:00:00.000000Z"},
    }
    record = {"id": {"S": "ChatFunction.answer#abc"}, "status": {"S": "COMPLETED"}}
    tables = {settings.projects_table: [project], settings.idempotency_table: [record]}
    (tmp_path / SNAPSHOT_FILE).write_text(json.dumps({"format": FORMAT, "tables": tables}))
    # When
    restored = Snapshots(tmp_path, embedded_store.endpoint, 60).restore()
    # Then
    assert restored == 1
    kept = project_store().get(project_id)
    assert kept is not None
    assert kept.name == "Kept"
