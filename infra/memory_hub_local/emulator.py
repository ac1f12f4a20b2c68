"""The embedded AWS of the local stack: moto in process, resources made from template.yaml, and
the functions of the template loaded as Lambda would load them (one module instance per
concurrent execution environment).

moto is not safe under concurrent calls, so every emulated AWS call runs under one lock: each is
atomic, while requests themselves run in parallel, as they would on Lambda.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterator

from .template import Function, Template, load

AWS_LOCK = threading.RLock()
LOCAL_BUCKET = "memory-hub-local"
LOCAL_TOKEN_SECRET = "memory-hub-local-token-secret"
_DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                      "AWS_SECURITY_TOKEN": "testing", "AWS_SESSION_TOKEN": "testing"}


def install_moto_lock() -> None:
    """Serialise every call that moto answers in process (idempotent)."""
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber, "_memory_hub_locked", False):
        return
    original = BotocoreStubber.__call__

    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with AWS_LOCK:
            return original(self, *args, **kwargs)

    BotocoreStubber.__call__ = locked  # type: ignore[method-assign]
    BotocoreStubber._memory_hub_locked = True  # type: ignore[attr-defined]


def install_copy_source_if_match() -> None:
    """moto ignores CopyObject's ``x-amz-copy-source-if-match``; S3 answers 412 when the source's
    ETag differs. Persona backups rely on it: without it a racing writer backs up the wrong
    version under the name of the one it read (idempotent)."""
    from urllib.parse import unquote, urlparse

    from moto.s3.exceptions import PreconditionFailed
    from moto.s3.responses import S3Response

    if getattr(S3Response, "_memory_hub_copy_if_match", False):
        return
    original = S3Response.copy_object

    def copy_object(self: Any) -> Any:
        expected = self.headers.get("x-amz-copy-source-if-match")
        if expected is not None:
            source = self.headers.get("x-amz-copy-source")
            if isinstance(source, bytes):
                source = source.decode("utf-8")
            bucket, key = unquote(urlparse(source).path).lstrip("/").split("/", 1)
            current = self.backend.get_object(bucket, key)
            if current is not None and expected.strip('"') != current.etag.strip('"'):
                raise PreconditionFailed(failed_condition="x-amz-copy-source-If-Match")
        return original(self)

    S3Response.copy_object = copy_object  # type: ignore[method-assign]
    S3Response._memory_hub_copy_if_match = True  # type: ignore[attr-defined]


def install_delete_objects_if_match() -> None:
    """moto ignores the per-object ``ETag`` of DeleteObjects; S3 deletes such an object only if it
    still has that ETag. Purges rely on it: a file rewritten after it was listed must survive.
    (Here the skipped object is simply left alone rather than reported as a 412 error.)"""
    from moto.s3.models import S3Backend

    if getattr(S3Backend, "_memory_hub_delete_if_match", False):
        return
    original = S3Backend.delete_objects

    def delete_objects(self: Any, bucket_name: str, objects: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        def unchanged(obj: dict[str, Any]) -> bool:
            expected = obj.get("ETag")
            if not expected:
                return True
            current = self.get_object(bucket_name, obj["Key"])
            return current is None or current.etag.strip('"') == str(expected).strip('"')

        return original(self, bucket_name, [o for o in objects if unchanged(o)], *args, **kwargs)

    S3Backend.delete_objects = delete_objects  # type: ignore[method-assign]
    S3Backend._memory_hub_delete_if_match = True  # type: ignore[attr-defined]


def install_cheap_transactions() -> None:
    """moto backs up a whole table (``deepcopy``) once per action of every TransactWriteItems, so
    a 100-action transaction on a 20,000-item table copies it 100 times: minutes and gigabytes.
    Same semantics, cheaper: every condition is checked against the state before the transaction
    (DynamoDB's rule; an item appears once per transaction), and only if all hold are the actions
    applied, with an undo log of just the touched items should one fail."""
    import copy

    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_memory_hub_cheap_transactions", False):
        return

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        seen: set[tuple[str, str]] = set()
        plan, errors, failed = [], [], False
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = self.get_table(op["TableName"])
            if op_type == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            marker = (op["TableName"], str(dict(sorted(key.items()))))
            if marker in seen:
                raise MultipleTransactionsException()
            seen.add(marker)
            current = self.get_item(op["TableName"], key)
            condition = op.get("ConditionExpression")
            if condition is not None and not get_filter_expression(
                    condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")).expr(current):
                old = current.to_json()["Attributes"] if current is not None and op.get(
                    "ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
                errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
                failed = True
                continue
            errors.append((None, None, None))
            plan.append((op_type, op, key, copy.deepcopy(current)))
        if failed:
            raise TransactionCanceledException(errors)
        undo = []
        try:
            for op_type, op, key, before in plan:
                names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
                if op_type == "Put":
                    self.put_item(op["TableName"], op["Item"])
                elif op_type == "Delete":
                    self.delete_item(op["TableName"], key)
                elif op_type == "Update":
                    self.update_item(op["TableName"], key, update_expression=op["UpdateExpression"],
                                     expression_attribute_names=names, expression_attribute_values=values)
                else:
                    continue
                undo.append((op["TableName"], key, before))
        except Exception:
            for table_name, key, before in reversed(undo):
                if before is None:
                    self.delete_item(table_name, key)
                else:
                    self.put_item(table_name, before.to_json()["Attributes"])
            raise

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend._memory_hub_cheap_transactions = True  # type: ignore[attr-defined]


def install_fast_dynamodb_reads() -> None:
    """moto runs every item of a Query/Scan/GetItem/BatchGetItem answer through its generic
    response serializer: about 3 ms an item here, 30 s for a 10,000-item partition. The items
    already are DynamoDB JSON (``dynamo_to_dict``), so they are spliced into the serialized rest
    of the answer as they are. (Binary attributes would need base64; nothing here uses them.)"""
    import json

    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult, "_memory_hub_fast_reads", False):
        return
    original = DynamoResult.execute_result
    bulky_members = {"Query": "Items", "Scan": "Items", "GetItem": "Item", "BatchGetItem": "Responses"}

    def execute_result(self: Any, context: Any) -> Any:
        bulky = bulky_members.get(str(context.operation_model.name))
        result = self._result
        if bulky is None or not isinstance(result, dict) or bulky not in result:
            return original(self, context)
        self._result = {k: v for k, v in result.items() if k != bulky}
        try:
            status, headers, body = original(self, context)
        finally:
            self._result = result
        payload = json.loads(body or "{}")
        payload[bulky] = result[bulky]
        text = json.dumps(payload, separators=(",", ":"))
        headers = {k: v for k, v in dict(headers).items() if k.lower() != "content-length"}
        return status, headers, text

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]
    DynamoResult._memory_hub_fast_reads = True  # type: ignore[attr-defined]


def install_partition_local_index_queries() -> None:
    """moto answers a query (on the table or a local secondary index) by sorting every item of the
    table, so a newest-20 query slows down with every other memory stored. Both share the table's
    partition key: such a query only ever needs that partition, which is what DynamoDB reads."""
    import inspect

    from moto.dynamodb.models.table import Table

    if getattr(Table, "_memory_hub_partition_lsi", False):
        return
    original = Table.query
    signature = inspect.signature(original)

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        index_name = arguments.get("index_name")
        local = index_name is None or any(index.name == index_name for index in self.indexes)
        value = arguments.get("hash_key")
        if value is None:
            value = dict(arguments.get("hash_key_conditions") or []).get(self.hash_key_attr)
        if not local or value is None or not self.range_key_attr:
            return original(self, *args, **kwargs)
        partition = list(self.items.get(value, {}).values())
        self.all_items = lambda: sorted(partition, key=lambda item: (item.hash_key, item.range_key))
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items  # back to the class's method

    Table.query = query  # type: ignore[method-assign]
    Table._memory_hub_partition_lsi = True  # type: ignore[attr-defined]


class LambdaContext:
    """The parts of Lambda's context object that handlers use."""

    def __init__(self, function: Function) -> None:
        self.function_name = function.logical_id
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function.logical_id}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function.logical_id}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + function.timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _resolve(value: Any, names: dict[str, str], parameters: dict[str, Any]) -> str:
    if isinstance(value, dict) and "Ref" in value:
        ref = value["Ref"]
        if ref in names:
            return names[ref]
        return str(parameters.get(ref, {}).get("Default", ""))
    return str(value)


@dataclass
class Stack:
    """moto + the template's tables and bucket + its functions, in this process."""

    template: Template
    names: dict[str, str]
    admin_key: str
    _mock: Any = None

    @classmethod
    def start(cls, admin_key: str | None = None, region: str | None = None) -> "Stack":
        for name, value in _DUMMY_CREDENTIALS.items():
            os.environ.setdefault(name, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", region or "us-east-1")
        os.environ.pop("AWS_ENDPOINT_URL", None)
        from moto import mock_aws

        install_moto_lock()
        install_copy_source_if_match()
        install_delete_objects_if_match()
        install_cheap_transactions()
        install_fast_dynamodb_reads()
        install_partition_local_index_queries()
        mock = mock_aws()
        mock.start()
        template = load()
        names = {logical_id: logical_id for logical_id in template.of_type("AWS::DynamoDB::Table")}
        names.update({logical_id: LOCAL_BUCKET for logical_id in template.of_type("AWS::S3::Bucket")})
        admin_key = admin_key or os.environ.get("MEMORY_HUB_BOOTSTRAP_ADMIN_KEY") or (
            "mhk_" + secrets.token_hex(6) + "_" + secrets.token_urlsafe(32))
        stack = cls(template, names, admin_key, mock)
        stack._environment()
        stack._create_resources()
        return stack

    def stop(self) -> None:
        if self._mock is not None:
            self._mock.stop()
            self._mock = None

    def _environment(self) -> None:
        parameters = load_parameters()
        env: dict[str, str] = {}
        for function in self.template.functions.values():
            for name, value in function.environment.items():
                env[name] = _resolve(value, self.names, parameters)
        env["MEMORY_HUB_BOOTSTRAP_ADMIN_KEY"] = self.admin_key
        env.setdefault("MEMORY_HUB_TOKEN_SECRET", LOCAL_TOKEN_SECRET)
        if not env.get("MEMORY_HUB_TOKEN_SECRET"):
            env["MEMORY_HUB_TOKEN_SECRET"] = LOCAL_TOKEN_SECRET
        for name, value in env.items():
            if name in ("MEMORY_HUB_SERVICE_ID", "RETENTION_DAYS", "RETENTION_MIN_L0", "RETENTION_MIN_L1") \
                    and os.environ.get(name):
                continue  # the caller's choice wins
            os.environ[name] = value
        # EMF metric lines are for CloudWatch; locally they would only drown the request log
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        from memory_hub.dal.models import bind
        from memory_hub.settings import get_settings

        get_settings.cache_clear()
        bind(get_settings())

    def _create_resources(self) -> None:
        import boto3

        region = os.environ["AWS_DEFAULT_REGION"]
        dynamodb = boto3.client("dynamodb", region_name=region)
        for logical_id, resource in self.template.of_type("AWS::DynamoDB::Table").items():
            props = resource["Properties"]
            args: dict[str, Any] = {
                "TableName": self.names[logical_id],
                "AttributeDefinitions": props["AttributeDefinitions"],
                "KeySchema": props["KeySchema"],
                "BillingMode": "PAY_PER_REQUEST",
            }
            for indexes in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
                if props.get(indexes):
                    args[indexes] = props[indexes]
            dynamodb.create_table(**args)
            ttl = props.get("TimeToLiveSpecification")
            if ttl:
                dynamodb.update_time_to_live(TableName=self.names[logical_id], TimeToLiveSpecification=ttl)
        s3 = boto3.client("s3", region_name=region)
        for logical_id in self.template.of_type("AWS::S3::Bucket"):
            if region == "us-east-1":
                s3.create_bucket(Bucket=self.names[logical_id])
            else:
                s3.create_bucket(Bucket=self.names[logical_id],
                                 CreateBucketConfiguration={"LocationConstraint": region})


def load_parameters() -> dict[str, Any]:
    from .template import load_raw

    return load_raw().get("Parameters", {})


class FunctionPool:
    """Execution environments per function: a request takes a free module instance or loads a
    new one, so concurrent requests never share a handler's module state."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self._free: dict[str, list[ModuleType]] = {name: [] for name in template.functions}
        self._lock = threading.Lock()
        self._loaded = 0

    def _load(self, function: Function) -> ModuleType:
        module_name, attr = function.handler.rsplit(".", 1)
        path = function.code_uri / f"{module_name.replace('.', '/')}.py"
        with self._lock:
            self._loaded += 1
            unique = f"memory_hub_fn_{function.logical_id}_{self._loaded}"
        spec = importlib.util.spec_from_file_location(unique, path)
        assert spec and spec.loader, path
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    @contextmanager
    def environment(self, name: str) -> Iterator[Any]:
        function = self.template.functions[name]
        with self._lock:
            module = self._free[name].pop() if self._free[name] else None
        if module is None:
            module = self._load(function)
        try:
            yield getattr(module, function.handler.rsplit(".", 1)[1])
        finally:
            with self._lock:
                self._free[name].append(module)

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        function = self.template.functions[name]
        with self.environment(name) as handler:
            return handler(event, LambdaContext(function))
