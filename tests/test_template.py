"""``template.yaml`` is deployable, and what runs locally is what it declares: the tables
the embedded store makes, the handlers it names, dependencies with wheels for the Lambda
runtime (python3.13 on arm64)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import boto3
import pytest

from local import embedded, template

BIN = Path(sys.executable).parent
RUNTIME_PLATFORM = "manylinux2014_aarch64"
RUNTIME_PYTHON = "3.13"

REQUIREMENTS = [
    template.ROOT / "layers" / "recall" / "requirements.txt",
    *sorted((template.ROOT / "functions").glob("*/requirements.txt")),
]


def run(command: list[str], timeout: int, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (our own tools, fixed arguments)
        command,
        cwd=template.ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_cfn_lint_finds_no_errors() -> None:
    # When
    result = run([str(BIN / "cfn-lint"), "template.yaml"], timeout=120)
    # Then: cfn-lint's exit code is a bit mask; 2 means errors (4 warnings, 8 informational)
    assert result.returncode & ~(4 | 8) == 0, result.stdout + result.stderr


def test_sam_validate_with_lint_passes() -> None:
    # When
    result = run(
        [str(BIN / "sam"), "validate", "--lint", "--template-file", "template.yaml"],
        timeout=120,
        AWS_DEFAULT_REGION="us-east-1",
        SAM_CLI_TELEMETRY="0",
    )
    # Then
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "requirements", REQUIREMENTS, ids=lambda path: str(path.relative_to(template.ROOT))
)
def test_requirements_resolve_to_wheels_for_the_lambda_runtime(
    requirements: Path, tmp_path: Path
) -> None:
    # Given
    assert requirements.is_file(), f"{requirements} is missing"
    # When: resolve the whole tree as Lambda's arm64 python3.13 would need it, wheels only
    result = run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--only-binary=:all:",
            "--platform",
            RUNTIME_PLATFORM,
            "--python-version",
            RUNTIME_PYTHON,
            "--implementation",
            "cp",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
            str(requirements),
            "-d",
            str(tmp_path),
        ],
        timeout=300,
    )
    # Then
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.glob("*.whl"))


def _key_schema(schema: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [(key["AttributeName"], key["KeyType"]) for key in schema]


def _indexes(description: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {
        index["IndexName"]: (
            _key_schema(index["KeySchema"]),
            index["Projection"]["ProjectionType"],
            sorted(index["Projection"].get("NonKeyAttributes", [])),
        )
        for index in description.get(kind, [])
    }


def test_every_local_table_is_a_template_table_with_its_keys_and_indexes(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given
    declared = template.resources("AWS::DynamoDB::Table")
    client = boto3.client("dynamodb", endpoint_url=embedded_store.endpoint)
    # When
    local = set(client.list_tables()["TableNames"])
    requested = {request["TableName"] for request in template.create_table_requests()}
    # Then
    assert local == requested == set(declared)
    for name, resource in declared.items():
        properties = resource["Properties"]
        table = client.describe_table(TableName=name)["Table"]
        assert _key_schema(table["KeySchema"]) == _key_schema(properties["KeySchema"]), name
        assert {
            (attribute["AttributeName"], attribute["AttributeType"])
            for attribute in table["AttributeDefinitions"]
        } == {
            (attribute["AttributeName"], attribute["AttributeType"])
            for attribute in properties["AttributeDefinitions"]
        }, name
        for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            assert _indexes(table, kind) == _indexes(properties, kind), f"{name} {kind}"
        if "TimeToLiveSpecification" in properties:
            ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            assert (
                ttl.get("AttributeName") == (properties["TimeToLiveSpecification"]["AttributeName"])
            ), name


@pytest.mark.parametrize("function", sorted(template.code_dirs()))
def test_each_function_handler_exists(function: str) -> None:
    # Given
    properties = template.resources("AWS::Serverless::Function")[function]["Properties"]
    module, _, handler = properties["Handler"].rpartition(".")
    source = template.code_dirs()[function] / f"{module.replace('.', '/')}.py"
    # When
    assert source.is_file(), f"{function}: Handler {properties['Handler']} but no {source}"
    tree = ast.parse(source.read_text())
    # Then
    assert handler in {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }, f"{source} defines no {handler}"
