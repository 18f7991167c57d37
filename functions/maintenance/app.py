"""Scheduled upkeep, one job per schedule: consolidation fans out per due user and project,
idle sessions are pruned and expired memory entries deleted, each reading only what is due."""

from __future__ import annotations

import gc

# Until recall.cold_start.loaded(), below: no collection while the module loads.
gc.disable()

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from recall.cold_start import loaded
from recall.domain import clock
from recall.domain.jobs import ScheduledJob
from recall.observability import logger, metrics, tracer
from recall.wiring import maintenance


class ScheduleInput(BaseModel):
    """What each schedule in template.yaml sends as its ``Input``."""

    job: ScheduledJob


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    job = ScheduleInput.model_validate(event).job
    report = maintenance().run(job, clock.now())
    logger.info("maintenance done", extra=report.model_dump())
    return report.model_dump(by_alias=True)


loaded()
