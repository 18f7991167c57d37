"""Reads ``template.yaml``, the single source of truth for tables, routes and environment."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
import re
from typing import Any

from cfnlint.decode import decode_str

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


class TemplateError(ValueError):
    """``template.yaml`` does not parse; the message carries cfn-lint's findings."""


def _plain(value: Any) -> Any:
    """cfn-lint's nodes (``str_node``, ``dict_node``, ``list_node``) carry source marks;
    plain values compare, serialise and reach boto3 like any other Python value."""
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """The template as cfn-lint reads it, short-form tags included (``!Ref X`` is
    ``{"Ref": "X"}``, ``!GetAtt A.B`` is ``{"Fn::GetAtt": ["A", "B"]}``)."""
    document, problems = decode_str(TEMPLATE.read_text())
    if document is None or problems:
        found = "; ".join(str(problem) for problem in problems) or "empty document"
        raise TemplateError(f"{TEMPLATE}: {found}")
    plain: dict[str, Any] = _plain(document)
    return plain


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {
        name: resource for name, resource in load()["Resources"].items() if resource["Type"] == kind
    }


def table_names() -> dict[str, str]:
    """Locally, each table is named after its logical id."""
    return {name: name for name in resources("AWS::DynamoDB::Table")}


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


def _resolve(value: Any, parameters: dict[str, str]) -> str:
    if isinstance(value, dict) and "Ref" in value:
        ref = value["Ref"]
        if ref in parameters:
            return parameters[ref]
        return str(table_names().get(ref, ref))
    return str(value)


def parameters(overrides: dict[str, str] | None = None) -> dict[str, str]:
    values = {
        name: str(spec["Default"])
        for name, spec in load().get("Parameters", {}).items()
        if "Default" in spec
    }
    values.update(overrides or {})
    return values


def environment(function: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """A function's environment variables: Globals, then its own, with refs resolved."""
    params = parameters(overrides)
    merged: dict[str, Any] = dict(
        load()["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    )
    own = resources("AWS::Serverless::Function")[function]["Properties"]
    merged.update(own.get("Environment", {}).get("Variables", {}))
    return {key: _resolve(value, params) for key, value in merged.items()}


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
