"""One logger, tracer and metrics object shared by every function."""

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger(service="recall")
tracer = Tracer(service="recall")
metrics = Metrics(namespace="Recall", service="recall")
