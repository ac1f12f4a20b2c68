"""The emulated account's resources: made from the template (tables, bucket, secrets) and kept in
a data directory, so keys and memory survive a stop, a crash and a restart of the local stack.

A snapshot is one gzip'd file of JSON lines (``state.json.gz``): a header (the format, every
secret's value, and the number of the first journal segment it does not hold, ``journal``), then
one record a line — every vector bucket, index and vector, every item of every table in DynamoDB
JSON, every object with its metadata — each after what holds it. It is written and read a record
at a time, so neither a compaction nor a start holds the whole snapshot (formats 1 and 2, one JSON
document, are still read). It is written atomically and durably (a temporary file, fsync'd,
renamed over the old one, the directory fsync'd) by a compaction, never while requests wait; the
journal (``journal.py``) holds every change since."""

from __future__ import annotations

import base64
import gzip
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID

from . import moto_items, s3vectors

SNAPSHOT = "state.json.gz"
FORMAT = 3
FORMATS = (1, 2, 3)  # 1 and 2: one JSON document (1, before the journal, holds no journal segment)


def dynamodb_backend(region: str) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID][region]


def s3_backend() -> Any:
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


def secrets_backend(region: str) -> Any:
    from moto.secretsmanager.models import secretsmanager_backends

    return secretsmanager_backends[DEFAULT_ACCOUNT_ID][region]


def forget_sessions() -> None:
    """Drop the boto3 session that made the resources and the one moto keeps to list regions: each
    holds botocore's endpoint data (~6.6 MiB once parsed) and the service models it loaded, and
    nothing needs them once the resources exist (a later client would load its own)."""
    import boto3
    from moto.core.base_backend import AccountSpecificBackend

    boto3.DEFAULT_SESSION = None
    AccountSpecificBackend.get_session.cache_clear()


class State:
    """Creates the template's resources in moto and keeps them across restarts."""

    def __init__(
        self, cfn: dict[str, Any], names: dict[str, str], region: str, data_dir: Path | None, admin_key: str | None
    ) -> None:
        self.cfn, self.names, self.region, self.data_dir = cfn, names, region, data_dir
        self.admin_key = admin_key
        self.secret_arns: dict[str, str] = {}
        self.secret_values: dict[str, str] = {}
        self.journal_start = 0  # the first journal segment the loaded snapshot does not hold
        self.snapshot_found = False

    # ---------------------------------------------------------------- creation
    def _resources(self, kind: str) -> dict[str, Any]:
        return {k: v for k, v in self.cfn["Resources"].items() if v["Type"] == kind}

    def create(self) -> None:
        import boto3

        saved = self._load()
        dynamodb = boto3.client("dynamodb", region_name=self.region)
        for logical_id, resource in self._resources("AWS::DynamoDB::Table").items():
            props = resource["Properties"]
            args: dict[str, Any] = {
                "TableName": self.names[logical_id],
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": props["AttributeDefinitions"],
                "KeySchema": props["KeySchema"],
            }
            for indexes in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
                if props.get(indexes):
                    args[indexes] = props[indexes]
            dynamodb.create_table(**args)
        s3 = boto3.client("s3", region_name=self.region)
        for logical_id in self._resources("AWS::S3::Bucket"):
            extra = (
                {} if self.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": self.region}}
            )
            s3.create_bucket(Bucket=self.names[logical_id], **extra)
        s3vectors.create_from_template(self.cfn, self.names, self.region)
        self._queues(boto3.client("sqs", region_name=self.region))
        manager = boto3.client("secretsmanager", region_name=self.region)
        saved_secrets = saved.get("secrets", {}) if saved else {}
        for logical_id in self._resources("AWS::SecretsManager::Secret"):
            value = saved_secrets.get(logical_id)
            if logical_id == "BootstrapAdminKeySecret" and self.admin_key:
                value = self.admin_key
            if value is None:  # GenerateSecretString, which moto lacks
                value = (
                    "mhk_" + secrets.token_hex(6) + "_" + secrets.token_urlsafe(32)
                    if logical_id == "BootstrapAdminKeySecret"
                    else secrets.token_urlsafe(48)
                )
            created = manager.create_secret(Name=f"{self.names[logical_id]}", SecretString=value)
            self.secret_arns[logical_id] = created["ARN"]
            self.secret_values[logical_id] = value
        if saved:
            self._restore(saved)
        forget_sessions()

    def _queues(self, sqs: Any) -> None:
        """The template's queues with their attributes (visibility timeout, retention, redrive to
        the dead-letter queue): dead-letter queues first, so a redrive names one that exists."""
        queues = self._resources("AWS::SQS::Queue")
        arns: dict[str, str] = {}
        for logical_id in sorted(queues, key=lambda q: "RedrivePolicy" in queues[q].get("Properties", {})):
            props = queues[logical_id].get("Properties", {})
            attributes = {
                name: str(props[name]) for name in ("VisibilityTimeout", "MessageRetentionPeriod") if name in props
            }
            redrive = props.get("RedrivePolicy")
            if redrive:
                target = redrive["deadLetterTargetArn"]
                dead = target["Fn::GetAtt"][0] if isinstance(target, dict) else str(target)
                policy = {"deadLetterTargetArn": arns[dead], "maxReceiveCount": int(redrive["maxReceiveCount"])}
                attributes["RedrivePolicy"] = json.dumps(policy)
            url = sqs.create_queue(QueueName=self.names[logical_id], Attributes=attributes)["QueueUrl"]
            arns[logical_id] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]

    # ---------------------------------------------------------------- persistence
    @property
    def path(self) -> Path | None:
        return self.data_dir / SNAPSHOT if self.data_dir else None

    def _load(self) -> dict[str, Any] | None:
        """The snapshot's first line: its header (format 3), or the whole snapshot (formats 1, 2)."""
        if self.path is None or not self.path.exists():
            return None
        with gzip.open(self.path, "rt", encoding="utf-8") as handle:
            data: dict[str, Any] = json.loads(handle.readline())
        if data.get("format") not in FORMATS:
            return None
        self.snapshot_found = True
        self.journal_start = int(data.get("journal", 0))
        return data

    def _restore(self, saved: dict[str, Any]) -> None:
        if saved.get("format") != FORMAT:
            self._restore_document(saved)
            return
        assert self.path is not None
        with gzip.open(self.path, "rt", encoding="utf-8") as handle:
            handle.readline()  # the header, read already
            for line in handle:
                self._restore_record(json.loads(line))

    def _restore_record(self, record: dict[str, Any]) -> None:
        kind = record.pop("kind")
        if kind == "item":
            table = dynamodb_backend(self.region).tables.get(record["table"])
            if table is not None:
                _fill(table, [record["item"]])
        elif kind == "object":
            if record["bucket"] in s3_backend().buckets:
                _put_object(record["bucket"], record)
        else:
            s3vectors.load_record(kind, record)

    def _restore_document(self, saved: dict[str, Any]) -> None:
        """A snapshot of format 1 or 2: one JSON document."""
        s3vectors.load_state(saved.get("s3vectors", {}))
        dynamodb = dynamodb_backend(self.region)
        for table_name, items in saved.get("dynamodb", {}).items():
            if table_name in dynamodb.tables:
                _fill(dynamodb.get_table(table_name), items)
        for bucket, objects in saved.get("s3", {}).items():
            if bucket in s3_backend().buckets:
                for entry in objects:
                    _put_object(bucket, entry)

    def records(self) -> Iterator[dict[str, Any]]:
        """Everything the account holds, one record at a time, each after what holds it (call where
        nothing changes the account: a compaction child, or a start before it serves)."""
        for kind, vectors in s3vectors.dump_records():
            yield {"kind": kind, **vectors}
        for name, table in dynamodb_backend(self.region).tables.items():
            for item in table.all_items():
                yield {"kind": "item", "table": name, "item": moto_items.attributes(item)}
        for name, bucket in s3_backend().buckets.items():
            for key in list(bucket.keys.values()):
                if hasattr(key, "value"):
                    yield {
                        "kind": "object",
                        "bucket": name,
                        "key": key.name,
                        "body": base64.b64encode(key.value).decode(),
                        "metadata": dict(key.metadata),
                        "last_modified": key.last_modified.replace(tzinfo=key.last_modified.tzinfo or UTC).isoformat(),
                    }

    def save(self, journal: int) -> None:
        """Write a snapshot of the account as it is that holds every journal segment below
        ``journal``, durably, a record at a time (what is written is never held whole)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stale in self.path.parent.glob(".state-*.tmp"):  # left by a compaction that was killed
            stale.unlink(missing_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".state-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as raw:
                with gzip.open(raw, "wt", encoding="utf-8", compresslevel=1) as out:
                    header = {"format": FORMAT, "journal": journal, "secrets": dict(self.secret_values)}
                    out.write(json.dumps(header, separators=(",", ":")) + "\n")
                    for record in self.records():
                        out.write(json.dumps(record, separators=(",", ":")) + "\n")
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(temporary, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _put_object(bucket: str, entry: dict[str, Any]) -> None:
    key = s3_backend().put_object(bucket, entry["key"], base64.b64decode(entry["body"]))
    key.set_metadata(entry["metadata"], replace=True)
    key.last_modified = datetime.fromisoformat(entry["last_modified"])


def apply_writes(table: Any, puts: list[dict[str, Any]], deletes: list[dict[str, Any]]) -> None:
    """Replay a successful write without moto's request path: what it put, what it deleted."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    _fill(table, puts)
    for key in deletes:
        hash_value = DynamoType(key[table.hash_key_attr])
        if table.range_key_attr:
            table.items[hash_value].pop(DynamoType(key[table.range_key_attr]), None)
            moto_items.forget_partition(table, hash_value)
        else:
            table.items.pop(hash_value, None)
    if deletes and hasattr(table, "_memory_hub_sorted"):
        table._memory_hub_sorted.clear()


def _fill(table: Any, items: list[dict[str, Any]]) -> None:
    """Put saved items into a moto table as moto holds them, without re-checking each (they were
    checked when written; moto's per-attribute size check makes a put quadratic in its size)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_attr, range_attr = table.hash_key_attr, table.range_key_attr
    for attrs in items:
        hash_key = (
            moto_items.partition_key(table, DynamoType(attrs[hash_attr]))
            if range_attr
            else DynamoType(attrs[hash_attr])
        )
        range_key = DynamoType(attrs[range_attr]) if range_attr else None
        item = moto_items.packed(hash_key, range_key, attrs)
        if range_attr:
            table.items[hash_key][range_key] = item
        else:
            table.items[hash_key] = item
    if items and hasattr(table, "_memory_hub_sorted"):  # sorted views of partitions are made again on use
        table._memory_hub_sorted.clear()
