"""SQS event sources, as Lambda's event source mapping runs them: for each function with an ``SQS``
event in ``template.yaml``, a poller receives up to ``BatchSize`` messages (with the function's
own credentials, so its IAM policy must allow ``sqs:ReceiveMessage``/``DeleteMessage``), invokes
the function with Lambda's SQS event, and deletes the messages it handled — all of them, or, with
``ReportBatchItemFailures``, all but the ``batchItemFailures`` it answered. A failed invocation
deletes nothing: the messages come back after the queue's visibility timeout."""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from typing import Any

from .functions import FunctionPool
from .identity import Credentials
from .template import Deployment, load_raw

log = logging.getLogger("memory_hub_local.event_sources")
# No long poll: the emulated AWS side answers every call under one lock (each call atomic), and
# moto waits out a long poll inside the call, so a waiting receive would hold every other call
# back. The poller asks again after IDLE_S instead (on AWS, Lambda's event source long-polls).
WAIT_S = 0
IDLE_S = 0.5


@dataclass(frozen=True)
class Source:
    function: str  # logical id
    queue_url: str
    queue_arn: str
    batch_size: int
    partial: bool  # ReportBatchItemFailures


def sources(deployment: Deployment) -> list[Source]:
    found: list[Source] = []
    for logical_id, resource in load_raw()["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function" or logical_id not in deployment.functions:
            continue
        for event in (resource["Properties"].get("Events") or {}).values():
            if event.get("Type") != "SQS":
                continue
            props = event["Properties"]
            queue = props["Queue"]["Fn::GetAtt"][0] if isinstance(props["Queue"], dict) else str(props["Queue"])
            found.append(
                Source(
                    logical_id,
                    str(deployment.value({"Ref": queue})),
                    str(deployment.value({"Fn::GetAtt": [queue, "Arn"]})),
                    int(props.get("BatchSize", 10)),
                    "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                )
            )
    return found


class Poller:
    def __init__(self, source: Source, pool: FunctionPool, aws_url: str, region: str, credentials: Credentials) -> None:
        import botocore.session

        own = credentials.function(source.function)
        self.source, self.pool = source, pool
        self.client = botocore.session.get_session().create_client(
            "sqs",
            region_name=region,
            endpoint_url=aws_url,
            aws_access_key_id=own.access_key,
            aws_secret_access_key=own.secret,
            aws_session_token=own.token,
        )
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sqs-{source.function}")

    def start(self) -> Poller:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if not self.once():
                    self.stopping.wait(IDLE_S)  # an empty queue: ask again shortly, not in a tight loop
            except Exception:  # a poller outlives a failed receive, as Lambda's does
                log.exception("SQS poll for %s failed", self.source.function)
                self.stopping.wait(1.0)

    def once(self) -> int:
        """One receive and (when anything came) one invocation: the messages received."""
        got = self.client.receive_message(
            QueueUrl=self.source.queue_url,
            MaxNumberOfMessages=min(10, self.source.batch_size),
            WaitTimeSeconds=WAIT_S,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not got:
            return 0
        region = self.source.queue_arn.split(":")[3]
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "messageAttributes": m.get("MessageAttributes", {}),
                    "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode()).hexdigest(),  # noqa: S324
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.source.queue_arn,
                    "awsRegion": region,
                }
                for m in got
            ]
        }
        outcome = self.pool.invoke(self.source.function, event)
        if outcome.error is not None:
            return len(got)  # nothing deleted: every message comes back after the visibility timeout
        failed: set[str] = set()
        if self.source.partial and isinstance(outcome.result, dict):
            failed = {str(f.get("itemIdentifier")) for f in outcome.result.get("batchItemFailures") or []}
        done = [m for m in got if m["MessageId"] not in failed]
        if done:
            self.client.delete_message_batch(
                QueueUrl=self.source.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(got)


def start(deployment: Deployment, pool: FunctionPool, aws_url: str, credentials: Credentials) -> list[Poller]:
    return [Poller(s, pool, aws_url, deployment.region, credentials).start() for s in sources(deployment)]


def stop(pollers: list[Any]) -> None:
    for poller in pollers:
        poller.stop()
