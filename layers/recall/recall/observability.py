"""One logger, tracer and metrics object shared by every function."""

from __future__ import annotations

from collections.abc import Callable
import functools
from typing import TYPE_CHECKING, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

Handler = TypeVar("Handler", bound=Callable[..., Any])

logger = Logger(service="recall")
metrics = Metrics(namespace="Recall", service="recall")


class LazyTracer:
    """Powertools' ``Tracer``, made on the first invocation rather than at import: the X-Ray
    SDK it loads makes an AWS client (``xray``, for sampling rules) and costs about as much
    CPU as ``import boto3`` itself. The work is not saved, only moved out of the import,
    which must make no AWS client (see docs/architecture.md, Cold start)."""

    def __init__(self, service: str) -> None:
        self._service = service

    @functools.cached_property
    def tracer(self) -> Tracer:
        from aws_lambda_powertools import Tracer

        return Tracer(service=self._service)

    def capture_lambda_handler(self, handler: Handler) -> Handler:
        """The handler in a subsegment with its cold start and service, but neither its
        answer nor its error as metadata: Powertools' default would send every response
        body (messages, memory values, exports) to X-Ray."""
        traced: list[Callable[..., Any]] = []

        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            if not traced:
                traced.append(
                    self.tracer.capture_lambda_handler(
                        handler, capture_response=False, capture_error=False
                    )
                )
            return traced[0](event, context)

        return cast(Handler, run)


tracer = LazyTracer(service="recall")
