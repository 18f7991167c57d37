"""Reads ``template.yaml``, the single source of truth for tables, queues, buckets, routes,
event sources, schedules and environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
import json
from pathlib import Path
import re
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


class TemplateError(ValueError):
    """``template.yaml`` does not parse, or names what has no local value."""


class _Loader(yaml.CSafeLoader):
    """YAML as CloudFormation reads it: a short-form tag is its long form. (``make
    template-lint`` checks the template with cfn-lint; running needs only this.)"""


def _long_form(loader: _Loader, name: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if name == "GetAtt":
            value = value.split(".", 1)
    return {name if name in ("Ref", "Condition") else f"Fn::{name}": value}


_Loader.add_multi_constructor("!", _long_form)


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """The template, short-form tags included (``!Ref X`` is ``{"Ref": "X"}``,
    ``!GetAtt A.B`` is ``{"Fn::GetAtt": ["A", "B"]}``)."""
    try:
        document = yaml.load(TEMPLATE.read_text(), Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as problem:
        raise TemplateError(f"{TEMPLATE}: {problem}") from problem
    if not isinstance(document, dict):
        raise TemplateError(f"{TEMPLATE}: not a mapping")
    return document


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {
        name: resource for name, resource in load()["Resources"].items() if resource["Type"] == kind
    }


def table_names() -> dict[str, str]:
    """Locally, each table is named after its logical id."""
    return {name: name for name in resources("AWS::DynamoDB::Table")}


def bucket_names() -> dict[str, str]:
    """Locally, each bucket is named after its logical id, in the lower case S3 needs."""
    return {name: name.lower() for name in resources("AWS::S3::Bucket")}


def create_table_requests() -> list[dict[str, Any]]:
    """``CreateTable`` requests built from the template's own table properties."""
    requests = []
    for name, resource in resources("AWS::DynamoDB::Table").items():
        properties = resource["Properties"]
        request: dict[str, Any] = {
            "TableName": name,
            "BillingMode": properties.get("BillingMode", "PAY_PER_REQUEST"),
            "AttributeDefinitions": properties["AttributeDefinitions"],
            "KeySchema": properties["KeySchema"],
        }
        for index_kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if index_kind in properties:
                request[index_kind] = properties[index_kind]
        requests.append(request)
    return requests


def time_to_live() -> dict[str, str]:
    return {
        name: resource["Properties"]["TimeToLiveSpecification"]["AttributeName"]
        for name, resource in resources("AWS::DynamoDB::Table").items()
        if "TimeToLiveSpecification" in resource["Properties"]
    }


def resolve(
    value: Any,
    parameters: Mapping[str, str],
    refs: Mapping[str, str] | None = None,
    attributes: Mapping[tuple[str, str], str] | None = None,
) -> Any:
    """``value`` with its intrinsic functions replaced by local values: ``Ref`` to a
    parameter, else to ``refs`` (a resource's local name or URL; an unknown resource keeps
    its logical id), and ``Fn::GetAtt`` to ``attributes`` by ``(logical id, attribute)``."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            ref = str(value["Ref"])
            if ref in parameters:
                return parameters[ref]
            return (refs or {}).get(ref, ref)
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            name, attribute = target if isinstance(target, list) else target.split(".", 1)
            found = (attributes or {}).get((name, attribute))
            if found is None:
                raise TemplateError(f"no local value for !GetAtt {name}.{attribute}")
            return found
        return {key: resolve(item, parameters, refs, attributes) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, parameters, refs, attributes) for item in value]
    return value


def parameters(overrides: dict[str, str] | None = None) -> dict[str, str]:
    values = {
        name: str(spec["Default"])
        for name, spec in load().get("Parameters", {}).items()
        if "Default" in spec
    }
    values.update(overrides or {})
    return values


def environment(
    function: str,
    overrides: dict[str, str] | None = None,
    refs: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A function's environment variables: Globals, then its own, with refs resolved (a
    table to its name, and whatever ``refs`` gives, e.g. a queue to its local URL)."""
    params = parameters(overrides)
    merged: dict[str, Any] = dict(
        load()["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    )
    own = resources("AWS::Serverless::Function")[function]["Properties"]
    merged.update(own.get("Environment", {}).get("Variables", {}))
    names = {**table_names(), **bucket_names(), **(refs or {})}
    return {key: str(resolve(value, params, names)) for key, value in merged.items()}


def function_timeout(function: str) -> int:
    """The function's ``Timeout`` in seconds, its own or the Globals'."""
    own = resources("AWS::Serverless::Function")[function]["Properties"]
    return int(own.get("Timeout", load()["Globals"]["Function"].get("Timeout", 3)))


@dataclass(frozen=True)
class Route:
    function: str
    method: str
    path: str
    pattern: re.Pattern[str]

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


def routes() -> list[Route]:
    """Every HTTP API route in the template and the function that serves it."""
    found = []
    for name, resource in resources("AWS::Serverless::Function").items():
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] != "HttpApi":
                continue
            path = event["Properties"]["Path"]
            regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
            found.append(
                Route(name, event["Properties"]["Method"].upper(), path, re.compile(f"^{regex}$"))
            )
    # Literal paths before templated ones, like API Gateway's most-specific match.
    return sorted(found, key=lambda route: (route.path.count("{"), -len(route.path)))


def code_dirs() -> dict[str, Path]:
    return {
        name: ROOT / resource["Properties"]["CodeUri"]
        for name, resource in resources("AWS::Serverless::Function").items()
    }


# --- Queues, their event sources and the schedules ----------------------------------------

# CloudFormation properties of AWS::SQS::Queue that are not queue attributes.
_NOT_QUEUE_ATTRIBUTES = frozenset({"QueueName", "Tags"})


def queue_names() -> dict[str, str]:
    """Locally, each queue is named after its logical id."""
    return {name: name for name in resources("AWS::SQS::Queue")}


def _referenced(value: Any) -> set[str]:
    """The logical ids a property refers to with ``Ref`` or ``Fn::GetAtt``."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return {str(value["Ref"])}
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            return {target[0] if isinstance(target, list) else target.split(".", 1)[0]}
        return set().union(*(_referenced(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_referenced(item) for item in value))
    return set()


def queue_order() -> list[str]:
    """Every queue's logical id, each after the queues it names (a dead-letter queue before
    the queue whose ``RedrivePolicy`` points at it)."""
    queues = resources("AWS::SQS::Queue")
    needs = {
        name: _referenced(resource.get("Properties", {})) & set(queues)
        for name, resource in queues.items()
    }
    ordered: list[str] = []
    while len(ordered) < len(queues):
        ready = sorted(
            name for name in queues if name not in ordered and needs[name] <= set(ordered)
        )
        if not ready:
            raise TemplateError(f"queues refer to each other in a cycle: {needs}")
        ordered += ready
    return ordered


def queue_attributes(
    name: str, attributes: Mapping[tuple[str, str], str] | None = None
) -> dict[str, str]:
    """The ``CreateQueue`` attributes of a queue, from its template properties: each one
    under its own name (they are SQS's attribute names), numbers and booleans as SQS's
    text, policies as JSON with their ``Fn::GetAtt`` (e.g. the dead-letter queue's ARN)
    resolved from ``attributes``."""
    properties = resources("AWS::SQS::Queue")[name].get("Properties", {})
    found: dict[str, str] = {}
    for key, value in properties.items():
        if key in _NOT_QUEUE_ATTRIBUTES:
            continue
        resolved = resolve(value, parameters(), queue_names(), attributes)
        if isinstance(resolved, bool):
            found[key] = "true" if resolved else "false"
        elif isinstance(resolved, dict | list):
            found[key] = json.dumps(resolved, separators=(",", ":"))
        else:
            found[key] = str(resolved)
    return found


@dataclass(frozen=True)
class QueueSource:
    """An SQS event of a function: Lambda polls ``queue`` and invokes ``function``."""

    function: str
    queue: str
    batch_size: int
    reports_failures: bool


def queue_sources() -> list[QueueSource]:
    found = []
    for name, resource in resources("AWS::Serverless::Function").items():
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] != "SQS":
                continue
            properties = event["Properties"]
            (queue,) = _referenced(properties["Queue"])
            found.append(
                QueueSource(
                    function=name,
                    queue=queue,
                    batch_size=int(properties.get("BatchSize", 10)),
                    reports_failures="ReportBatchItemFailures"
                    in properties.get("FunctionResponseTypes", []),
                )
            )
    return found


@dataclass(frozen=True)
class Schedule:
    """A ``ScheduleV2`` event: EventBridge Scheduler invokes ``function`` with ``input``."""

    function: str
    event: str
    input: dict[str, Any]

    @property
    def job(self) -> str:
        """What ``make job`` calls it: the input's ``job``, else the event's name."""
        return str(self.input.get("job", self.event))


def schedules() -> list[Schedule]:
    found = []
    for name, resource in resources("AWS::Serverless::Function").items():
        for event_name, event in resource["Properties"].get("Events", {}).items():
            if event["Type"] not in {"ScheduleV2", "Schedule"}:
                continue
            raw = event["Properties"].get("Input", "{}")
            found.append(Schedule(name, event_name, json.loads(raw)))
    return found
