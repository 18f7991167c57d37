"""Background work, as the queue carries it: each job names the user and project it is
for, and runs at most once per claim however often it is delivered."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel


class JobKind(StrEnum):
    EXTRACT = "extract"
    SUMMARIZE = "summarize"
    CONSOLIDATE = "consolidate"
    ERASE = "erase"
    IMPORT = "import"


class _Job(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    user_id: str
    project_id: str


class ExtractJob(_Job):
    """Propose memory entries from a thread's recent turns."""

    kind: Literal[JobKind.EXTRACT] = JobKind.EXTRACT
    conversation_id: str


class SummarizeJob(_Job):
    """Fold the messages that left a thread's window into its rolling summary."""

    kind: Literal[JobKind.SUMMARIZE] = JobKind.SUMMARIZE
    conversation_id: str


class ConsolidateJob(_Job):
    """Merge, resolve, prune and cap one user's memory in one project."""

    kind: Literal[JobKind.CONSOLIDATE] = JobKind.CONSOLIDATE


class EraseJob(_Job):
    """Go on erasing a user's data in a project (``whole_project``: every member's, then
    the project), where the request that began it stopped: the marker it left says so."""

    kind: Literal[JobKind.ERASE] = JobKind.ERASE
    whole_project: bool = False


class ImportJob(_Job):
    """Write one chunk of an import, then queue the next: chunks go one at a time, in
    order, so a thread's messages are in before the chunk that creates the thread."""

    kind: Literal[JobKind.IMPORT] = JobKind.IMPORT
    import_id: str
    chunk: int


AnyJob = ExtractJob | SummarizeJob | ConsolidateJob | EraseJob | ImportJob
_JOB: TypeAdapter[AnyJob] = TypeAdapter(Annotated[AnyJob, Field(discriminator="kind")])


def job_body(job: AnyJob) -> str:
    return job.model_dump_json(by_alias=True)


def job_of(body: str) -> AnyJob:
    """A queue message's job; a malformed one raises ``pydantic.ValidationError``."""
    return _JOB.validate_json(body)


class ScheduledJob(StrEnum):
    """What each schedule runs: each reads only what is due."""

    CONSOLIDATE = "consolidate"
    PRUNE_SESSIONS = "prune-sessions"
    EXPIRE_MEMORIES = "expire-memories"
