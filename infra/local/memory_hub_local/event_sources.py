"""SQS event sources, as Lambda's event source mapping runs them: for each function with an ``SQS``
event in ``template.yaml``, a poller receives up to ``BatchSize`` messages (with the function's
own credentials, so its IAM policy must allow ``sqs:ReceiveMessage``/``DeleteMessage``), invokes
the function with Lambda's SQS event, and deletes the messages it handled — all of them, or, with
``ReportBatchItemFailures``, all but the ``batchItemFailures`` it answered. A failed invocation
deletes nothing: the messages come back after the queue's visibility timeout. With
``MaximumBatchingWindowInSeconds``, a batch gathers (10 messages a receive, SQS's limit) until it
holds ``BatchSize`` messages or the window has passed since its first one, as Lambda's does.

Up to ``ScalingConfig.MaximumConcurrency`` invocations of a source run at once (each batch on a
thread of its own, received while fewer than that many run); a source without it runs one at a
time (Lambda would scale it up to its own limits; locally, one keeps the order of a small queue's
batches). Messages sent with a ``DelaySeconds`` are received once it has passed (moto honours it)."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
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
    concurrency: int = 1  # ScalingConfig.MaximumConcurrency (Lambda: 2 to 1,000), else one at a time
    window_s: float = 0.0  # MaximumBatchingWindowInSeconds


def sources(deployment: Deployment) -> list[Source]:
    found: list[Source] = []
    for logical_id, resource in load_raw()["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function" or logical_id not in deployment.functions:
            continue
        for event in (resource["Properties"].get("Events") or {}).values():
            if event.get("Type") != "SQS":
                continue
            props = event["Properties"]
            if deployment.value(props.get("Enabled", True)) in (False, "false", "False"):
                continue  # a mapping that is off polls nothing (VectorDrainMinutes: a schedule drains)
            queue = props["Queue"]["Fn::GetAtt"][0] if isinstance(props["Queue"], dict) else str(props["Queue"])
            found.append(
                Source(
                    logical_id,
                    str(deployment.value({"Ref": queue})),
                    str(deployment.value({"Fn::GetAtt": [queue, "Arn"]})),
                    int(deployment.value(props.get("BatchSize", 10))),
                    "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                    int((props.get("ScalingConfig") or {}).get("MaximumConcurrency") or 1),
                    float(deployment.value(props.get("MaximumBatchingWindowInSeconds", 0))),
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
        self.slots = threading.BoundedSemaphore(max(1, source.concurrency))  # invocations that may run at once
        self.running = 0  # invocations running now
        self.most = 0  # the most that ever ran at once
        self._counting = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sqs-{source.function}")

    def start(self) -> Poller:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            if not self.slots.acquire(timeout=IDLE_S):  # as many invocations run as may: wait for one to end
                continue
            try:
                got = self.receive()
            except Exception:  # a poller outlives a failed receive, as Lambda's does
                self.slots.release()
                log.exception("SQS poll for %s failed", self.source.function)
                self.stopping.wait(1.0)
                continue
            if not got:
                self.slots.release()
                self.stopping.wait(IDLE_S)  # an empty queue: ask again shortly, not in a tight loop
                continue
            threading.Thread(
                target=self._handle_then_release, args=(got,), daemon=True, name=f"sqs-{self.source.function}-batch"
            ).start()

    def _handle_then_release(self, got: list[dict[str, Any]]) -> None:
        with self._counting:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            self.handle(got)
        except Exception:  # the messages come back after the visibility timeout
            log.exception("SQS batch for %s failed", self.source.function)
        finally:
            with self._counting:
                self.running -= 1
            self.slots.release()

    def once(self) -> int:
        """One receive and (when anything came) one invocation, here: the messages received."""
        got = self.receive()
        if got:
            self.handle(got)
        return len(got)

    def receive(self) -> list[dict[str, Any]]:
        """One batch: what one receive brings (up to 10 messages, SQS's limit) — or, with a batching
        window, receives until ``BatchSize`` messages came or the window has passed since the first."""
        got = self._receive(self.source.batch_size)
        if not got or self.source.window_s <= 0:
            return got
        closes = time.monotonic() + self.source.window_s
        while len(got) < self.source.batch_size and not self.stopping.is_set():
            more = self._receive(self.source.batch_size - len(got))
            got += more
            if time.monotonic() >= closes:
                break
            if not more:
                self.stopping.wait(min(IDLE_S, max(0.0, closes - time.monotonic())))
        return got

    def _receive(self, most: int) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = self.client.receive_message(
            QueueUrl=self.source.queue_url,
            MaxNumberOfMessages=min(10, most),
            WaitTimeSeconds=WAIT_S,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        return got

    def handle(self, got: list[dict[str, Any]]) -> None:
        """Invoke the function with one batch and delete what it handled."""
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
            return  # nothing deleted: every message comes back after the visibility timeout
        failed: set[str] = set()
        if self.source.partial and isinstance(outcome.result, dict):
            failed = {str(f.get("itemIdentifier")) for f in outcome.result.get("batchItemFailures") or []}
        done = [m for m in got if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):  # DeleteMessageBatch takes 10 entries
            self.client.delete_message_batch(
                QueueUrl=self.source.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
                ],
            )


def start(deployment: Deployment, pool: FunctionPool, aws_url: str, credentials: Credentials) -> list[Poller]:
    return [Poller(s, pool, aws_url, deployment.region, credentials).start() for s in sources(deployment)]


def stop(pollers: list[Any]) -> None:
    for poller in pollers:
        poller.stop()
