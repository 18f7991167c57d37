"""Bodies of the export and import routes. The export's body is the export document itself
(``recall.domain.exports.ExportDocument``), which an import takes back unchanged."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.shared.json_encoder import Encoder
from pydantic import AliasChoices, Field

from recall.api.models import View
from recall.domain.exports import answer_text
from recall.domain.imports import ImportProgress, ImportStatus


class ImportProgressView(View):
    id: str = Field(validation_alias=AliasChoices("id", "import_id"))
    status: ImportStatus
    threads_total: int
    threads_done: int
    messages_done: int
    memories_done: int
    presets_done: int = Field(description="The export's presets created in this project.")
    errors: list[str]
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, progress: ImportProgress) -> ImportProgressView:
        return cls.model_validate(progress, from_attributes=True)


# The export's answer is UTF-8 and says so: its size is counted as sent (``answer_size``).
EXPORT_CONTENT_TYPE = "application/json; charset=utf-8"


def utf8_json(value: Any) -> str:
    """The data routes' bodies written as the export counts them: ``answer_text``, with
    Powertools' encoder for what plain JSON cannot write."""
    return answer_text(value, Encoder)
