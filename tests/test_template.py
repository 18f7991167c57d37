"""``template.yaml`` passes cfn-lint (SAM transform included), and what runs locally is what
it declares: the tables the embedded store makes and the handlers it names. The checks that
need the network or the SAM CLI are in ``tests/deploy`` and the Makefile's ``check-*``."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any

import boto3
import pytest

from local import embedded, template

BIN = Path(sys.executable).parent


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


def _types(value: Any) -> set[type]:
    """The exact type of a value and of everything inside it, keys included."""
    found = {type(value)}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= _types(key) | _types(item)
    elif isinstance(value, list):
        for item in value:
            found |= _types(item)
    return found


def test_the_template_loads_as_plain_python_values() -> None:
    # When
    document = template.load()
    # Then: none of the parser's own node types, so values compare, serialise and reach
    # boto3 like any other
    assert _types(document) <= {dict, list, str, int, float, bool, type(None)}
    assert json.loads(json.dumps(document)) == document
    assert document["Globals"]["Function"]["Layers"] == [{"Ref": "RecallLayer"}]


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


def test_the_http_api_logs_each_request_as_one_json_line_without_bodies_or_tokens() -> None:
    # Given
    api = template.resources("AWS::Serverless::HttpApi")["HttpApi"]["Properties"]
    settings = api["AccessLogSettings"]
    # When
    fields = json.loads(settings["Format"])
    # Then: request metadata only, into a log group that expires
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["HttpApiAccessLogs", "Arn"]}
    group = template.resources("AWS::Logs::LogGroup")["HttpApiAccessLogs"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "AccessLogRetentionDays"}
    assert {"requestId", "routeKey", "status", "responseLatency"} <= set(fields)
    variables = " ".join(fields.values()).lower()
    for leak in ("body", "header", "authorization", "token", "$request"):
        assert leak not in variables, f"the access log would carry {leak}"
    assert fields["user"] == "$context.authorizer.claims.sub"


def test_every_function_logs_into_a_group_that_expires() -> None:
    # Given every function, and the log group the Globals send them to
    functions = template.resources("AWS::Serverless::Function")
    logging = template.load()["Globals"]["Function"]["LoggingConfig"]
    groups = template.resources("AWS::Logs::LogGroup")
    # Then no function names a group of its own, and every group has a retention
    assert logging == {"LogGroup": {"Ref": "FunctionLogs"}}
    assert not [name for name, f in functions.items() if "LoggingConfig" in f["Properties"]]
    assert groups["FunctionLogs"]["Properties"]["RetentionInDays"] == {
        "Ref": "FunctionLogRetentionDays"
    }
    assert all("RetentionInDays" in group["Properties"] for group in groups.values())


def test_every_route_is_throttled_by_parameters_with_sane_defaults() -> None:
    # Given
    api = template.resources("AWS::Serverless::HttpApi")["HttpApi"]["Properties"]
    parameters = template.load()["Parameters"]
    # When
    route = api["DefaultRouteSettings"]
    # Then
    assert route == {
        "ThrottlingRateLimit": {"Ref": "ThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "ThrottlingBurstLimit"},
    }
    rate = int(parameters["ThrottlingRateLimit"]["Default"])
    burst = int(parameters["ThrottlingBurstLimit"]["Default"])
    assert 0 < rate <= burst <= 5000  # under the account's own API Gateway quota


def test_tables_use_the_customer_managed_key_only_when_one_is_given() -> None:
    # Given
    document = template.load()
    # When
    tables = template.resources("AWS::DynamoDB::Table")
    # Then: an empty TableKmsKeyArn (the default) leaves DynamoDB's own key in place
    assert document["Parameters"]["TableKmsKeyArn"]["Default"] == ""
    assert document["Conditions"]["HasTableKmsKey"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "TableKmsKeyArn"}, ""]}]
    }
    for name, table in tables.items():
        assert table["Properties"]["SSESpecification"] == {
            "SSEEnabled": True,
            "SSEType": {"Fn::If": ["HasTableKmsKey", "KMS", {"Ref": "AWS::NoValue"}]},
            "KMSMasterKeyId": {
                "Fn::If": ["HasTableKmsKey", {"Ref": "TableKmsKeyArn"}, {"Ref": "AWS::NoValue"}]
            },
        }, name


def test_every_skipped_scanner_check_says_why() -> None:
    # Given
    resources = template.load()["Resources"]
    # When
    skips = [
        (name, skip)
        for name, resource in resources.items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]
    # Then
    assert skips
    for name, skip in skips:
        assert skip["id"].startswith("CKV_"), (name, skip)
        assert len(skip.get("comment", "")) > 20, f"{name} skips {skip['id']} without saying why"


def test_listing_the_exports_bucket_is_granted_under_its_exports_prefix_only() -> None:
    # Given every statement that lets a function list the exports bucket
    listing = [
        statement
        for resource in template.resources("AWS::Serverless::Function").values()
        for policy in resource["Properties"].get("Policies", [])
        for statement in policy["Statement"]
        if "s3:ListBucket" in statement["Action"]
    ]
    # Then each lists only where exports are written (exports/<user>/<projectId>/)
    assert listing
    for statement in listing:
        assert statement["Condition"] == {"StringLike": {"s3:prefix": "exports/*"}}


def _alarms_on(namespace: str, metric: str) -> dict[str, dict[str, Any]]:
    """The template's alarms on ``metric``, by the one dimension each watches."""
    found = {}
    for name, alarm in template.resources("AWS::CloudWatch::Alarm").items():
        properties = alarm["Properties"]
        if (properties["Namespace"], properties["MetricName"]) == (namespace, metric):
            (dimension,) = properties["Dimensions"]
            found[json.dumps(dimension["Value"], sort_keys=True)] = {"name": name, **properties}
    return found


def test_a_failed_scheduled_run_raises_an_alarm_on_the_alarm_topic() -> None:
    # Given the maintenance function's schedules, its errors alarm and the queue depth alarms
    maintenance = template.resources("AWS::Serverless::Function")["MaintenanceFunction"]
    schedules = [
        event["Properties"]
        for event in maintenance["Properties"]["Events"].values()
        if event["Type"] == "ScheduleV2"
    ]
    errors = _alarms_on("AWS/Lambda", "Errors")
    depths = _alarms_on("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    # Then a run that raises (Scheduler invokes asynchronously, so Lambda retries it) is
    # counted by an alarm on the function's errors
    errors_alarm = errors[json.dumps({"Ref": "MaintenanceFunction"})]
    assert errors_alarm["Statistic"] == "Sum"
    assert (errors_alarm["ComparisonOperator"], errors_alarm["Threshold"]) == (
        "GreaterThanThreshold",
        0,
    )
    # And an invocation a schedule could not deliver after its retries is dead-lettered
    # into a queue whose depth has an alarm
    assert len(schedules) == 3
    for schedule in schedules:
        assert schedule["RetryPolicy"] == {"MaximumRetryAttempts": 2}
        assert schedule["DeadLetterConfig"] == {
            "Arn": {"Fn::GetAtt": ["MaintenanceDeadLetterQueue", "Arn"]}
        }
    assert json.dumps({"Fn::GetAtt": ["MaintenanceDeadLetterQueue", "QueueName"]}) in depths
    # And every alarm notifies the alarm topic when one is given
    for alarm in template.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == {
            "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }


def test_every_dead_letter_queue_has_a_depth_alarm() -> None:
    # Given every queue a redrive policy or a schedule's DeadLetterConfig names
    queues = template.resources("AWS::SQS::Queue")
    dead_letter = {
        queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for queue in queues.values()
        if "RedrivePolicy" in queue["Properties"]
    } | {
        event["Properties"]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
        for function in template.resources("AWS::Serverless::Function").values()
        for event in function["Properties"].get("Events", {}).values()
        if "DeadLetterConfig" in event["Properties"]
    }
    # When
    depths = _alarms_on("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    # Then
    assert dead_letter == {"MemoryJobsDeadLetterQueue", "MaintenanceDeadLetterQueue"}
    for queue in dead_letter:
        assert json.dumps({"Fn::GetAtt": [queue, "QueueName"]}) in depths, queue
