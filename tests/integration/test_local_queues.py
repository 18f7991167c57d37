"""The embedded SQS: every queue of ``template.yaml`` exists in the run's moto server as the
template declares it, and the functions' environment points at it."""

from __future__ import annotations

import json
import os

import boto3

from local import embedded, template
from recall.settings import Settings, get_settings


def test_every_local_queue_is_a_template_queue_with_its_attributes(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given
    client = boto3.client("sqs", endpoint_url=embedded_store.endpoint, region_name="us-east-1")
    declared = template.resources("AWS::SQS::Queue")
    # When
    local = {url.rsplit("/", 1)[-1]: url for url in client.list_queues().get("QueueUrls", [])}
    # Then: named after the logical ids, nothing more, nothing less
    assert declared, "template.yaml declares no queue"
    assert set(local) == set(declared) == set(embedded_store.queues)
    arns = {}
    for name, url in local.items():
        attributes = client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        arns[name] = attributes["QueueArn"]
        assert embedded_store.queues[name].url == url
        assert embedded_store.queues[name].arn == attributes["QueueArn"]
        properties = declared[name]["Properties"]
        for attribute in ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds"):
            if attribute in properties:
                assert attributes[attribute] == str(properties[attribute]), (name, attribute)
        if "SqsManagedSseEnabled" in properties:
            assert (
                attributes["SqsManagedSseEnabled"]
                == str(properties["SqsManagedSseEnabled"]).lower()
            )
    # And the redrive policy names the local dead-letter queue, with the template's count
    for name, resource in declared.items():
        redrive = resource["Properties"].get("RedrivePolicy")
        url = local[name]
        found = (
            client.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
            .get("Attributes", {})
            .get("RedrivePolicy")
        )
        if redrive is None:
            assert found is None, name
            continue
        target, _ = redrive["deadLetterTargetArn"]["Fn::GetAtt"]
        policy = json.loads(found)
        assert policy["deadLetterTargetArn"] == arns[target], name
        assert int(policy["maxReceiveCount"]) == redrive["maxReceiveCount"], name


def test_memory_jobs_queue_is_redriven_to_its_dead_letter_queue_after_three_receives(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given: what the template says today, read from moto
    client = boto3.client("sqs", endpoint_url=embedded_store.endpoint, region_name="us-east-1")
    jobs = embedded_store.queues["MemoryJobsQueue"]
    # When
    attributes = client.get_queue_attributes(QueueUrl=jobs.url, AttributeNames=["All"])[
        "Attributes"
    ]
    # Then
    policy = json.loads(attributes["RedrivePolicy"])
    assert policy["deadLetterTargetArn"] == embedded_store.queues["MemoryJobsDeadLetterQueue"].arn
    assert int(policy["maxReceiveCount"]) == 3
    assert attributes["VisibilityTimeout"] == "720"


def test_the_functions_environment_names_the_local_queue_by_its_url(
    embedded_store: embedded.EmbeddedStore,
) -> None:
    # Given
    client = boto3.client("sqs", endpoint_url=embedded_store.endpoint, region_name="us-east-1")
    # When
    url = client.get_queue_url(QueueName="MemoryJobsQueue")["QueueUrl"]
    # Then: `!Ref MemoryJobsQueue` is the local queue's URL, and the settings read it
    assert os.environ["MEMORY_JOBS_QUEUE_URL"] == url
    assert get_settings().memory_jobs_queue_url == url
    assert os.environ["AWS_ENDPOINT_URL_SQS"] == embedded_store.endpoint
    assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == embedded_store.endpoint
    assert embedded.local_environment(embedded_store.endpoint)["MEMORY_JOBS_QUEUE_URL"] == url


def test_the_local_environment_leaves_every_other_setting_to_the_process() -> None:
    """``make dev``'s caller shortens durations through the environment
    (``SESSION_IDLE_SECONDS=2 make dev``): the local environment must not set them."""
    # Given
    settings = {name.upper() for name in Settings.model_fields}
    declared = set(template.load()["Globals"]["Function"]["Environment"]["Variables"]) | {
        name
        for resource in template.resources("AWS::Serverless::Function").values()
        for name in resource["Properties"].get("Environment", {}).get("Variables", {})
    }
    # When
    overridden = settings & set(embedded.local_environment("http://127.0.0.1:1"))
    # Then
    assert overridden <= declared, f"set locally but not by the template: {overridden - declared}"
    for name in (
        "SESSION_IDLE_SECONDS",
        "EXTRACT_COOLDOWN_SECONDS",
        "CONSOLIDATE_MIN_SECONDS",
        "LOCAL_SCHEDULE_SECONDS",
    ):
        assert name in settings, name
        assert name not in overridden, name
