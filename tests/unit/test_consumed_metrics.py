"""Every DynamoDB call asks ReturnConsumedCapacity, and a request's EMF line reports the read and
write units its calls' answers said (memory_hub.storage.consumed, memory_hub.observability): the
answers stubbed at the client's boundary (aws_faults), then once through the emulated DynamoDB."""

from __future__ import annotations

import json
from typing import Any

from aws_faults import Calls, answer, hook
from memory_hub import observability
from memory_hub.storage import aws as clients
from memory_hub.storage import concurrency, consumed


def _emf(out: str) -> dict[str, Any]:
    lines = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    assert len(lines) == 1, out  # one line a request: its count and its units together
    return lines[0]


def _value(line: dict[str, Any], name: str) -> float:
    value = line[name]
    return float(value[0] if isinstance(value, list) else value)


def test_a_requests_metric_is_the_sum_of_what_its_calls_answers_said(aws, capsys):
    ddb = clients.dynamodb()
    calls = Calls(
        answer(200, {"Item": {},
                     "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5, "ReadCapacityUnits": 0.5}}),
        answer(200, {"ConsumedCapacity": [{"TableName": "a", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},
                                          {"TableName": "b", "CapacityUnits": 2.0, "WriteCapacityUnits": 2.0}]}),
        answer(200, {"Items": [], "Count": 0, "ScannedCount": 0,
                     "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.5}}),  # no split: a Query reads
        answer(200, {"Attributes": {},
                     "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 3.0}}),  # no split: an update writes
        answer(200, {"Table": {"TableName": "t"}}),  # DescribeTable: nothing to ask, nothing consumed
    )  # fmt: skip
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    with hook(ddb, "before-call.dynamodb", calls):
        token = observability.start_usage()
        try:
            ddb.get_item(TableName="t", Key=key)
            concurrency.submit(lambda: ddb.transact_write_items(TransactItems=[])).result()  # on the pool
            ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}})
            ddb.update_item(TableName="t", Key=key, UpdateExpression="SET a = :a",
                            ExpressionAttributeValues={":a": {"S": "a"}})  # fmt: skip
            ddb.describe_table(TableName="t")
            capsys.readouterr()
            observability.count_request("/v3/test", 200)
        finally:
            observability.stop_usage(token)
    line = _emf(capsys.readouterr().out)
    assert _value(line, "DynamoDBReadUnits") == 0.5 + 1.5
    assert _value(line, "DynamoDBWriteUnits") == 4.0 + 2.0 + 3.0
    assert line["route"] == "/v3/test" and _value(line, "Requests") == 1
    asked = [json.loads(p["body"] or b"{}").get("ReturnConsumedCapacity") for p in calls.params]  # as sent
    assert asked == ["TOTAL", "TOTAL", "TOTAL", "TOTAL", None]


def test_outside_a_request_nothing_is_counted_and_a_caller_may_choose_the_mode(aws):
    assert observability.current_usage() is None
    consumed.count({"ConsumedCapacity": {"CapacityUnits": 9.0}}, type("Model", (), {"name": "PutItem"})())
    params = {"ReturnConsumedCapacity": "INDEXES"}
    consumed.ask(params, clients.dynamodb().meta.service_model.operation_model("PutItem"))
    assert params == {"ReturnConsumedCapacity": "INDEXES"}


def test_through_the_emulated_dynamodb_a_35_kb_put_reports_4_write_units(aws, capsys):
    item = {"pk": {"S": "capacity-metric"}, "sk": {"S": "one"}, "d": {"S": "x" * (3584 - 31)}}
    token = observability.start_usage()
    try:
        clients.dynamodb().put_item(TableName="ItemsTable", Item=item)
        clients.dynamodb().get_item(TableName="ItemsTable", Key={k: item[k] for k in ("pk", "sk")})
        capsys.readouterr()
        observability.count_request("/v3/test", 200)
    finally:
        observability.stop_usage(token)
        clients.dynamodb().delete_item(TableName="ItemsTable", Key={k: item[k] for k in ("pk", "sk")})
    line = _emf(capsys.readouterr().out)
    assert (_value(line, "DynamoDBWriteUnits"), _value(line, "DynamoDBReadUnits")) == (4.0, 0.5)
