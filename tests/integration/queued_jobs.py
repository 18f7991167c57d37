"""Reading one user's jobs off the embedded jobs queue, which every test shares."""

from __future__ import annotations

import json

import boto3

from local import background, embedded


def take_queued(store: embedded.EmbeddedStore, user_id: str) -> list[str]:
    """The bodies of the jobs queue's messages for ``user_id``, taken off the queue. Other
    tests' messages stay hidden until the whole queue has been read (made visible at once,
    the same ten could come back on every receive and hide ours), then are visible again."""
    queue = store.queues["MemoryJobsQueue"]
    client = boto3.client("sqs", endpoint_url=store.endpoint, region_name=background.REGION)
    found: list[str] = []
    others: list[str] = []
    while messages := client.receive_message(
        QueueUrl=queue.url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=60
    ).get("Messages", []):
        for message in messages:
            handle = message["ReceiptHandle"]
            if json.loads(message["Body"]).get("userId") == user_id:
                found.append(message["Body"])
                client.delete_message(QueueUrl=queue.url, ReceiptHandle=handle)
            else:
                others.append(handle)
    for handle in others:
        client.change_message_visibility(
            QueueUrl=queue.url, ReceiptHandle=handle, VisibilityTimeout=0
        )
    return found
