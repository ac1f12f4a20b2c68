"""template.yaml holds what the deployed stack promises: routes equal to the routes table, least
privilege, log retention, alarms, the envelope on API Gateway's own answers, tables that match
the PynamoDB models, a layer that builds from the same pins — and cfn-lint passes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_hub import observability
from memory_hub.edge.routes import PUBLIC_GET, ROUTES
from memory_hub_local.template import ROOT, TEMPLATE, load_raw

CATCH_ALL = "/{proxy+}"
# The function that answers /health, /openapi.json, /docs and every unknown path.
PUBLIC_FUNCTION = "AdminFunction"
SAM_POLICY_TEMPLATES = {
    "DynamoDBReadPolicy": "TableName",
    "DynamoDBWritePolicy": "TableName",
    "DynamoDBCrudPolicy": "TableName",
    "S3ReadPolicy": "BucketName",
}
BROAD_MANAGED_POLICY = re.compile(r"Administrator|PowerUser|FullAccess", re.IGNORECASE)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_raw()


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r.get("Type") == kind}


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _of_type(template, "AWS::Serverless::Function")


def _ref(value: Any) -> str | None:
    return value.get("Ref") if isinstance(value, dict) else None


def _api_events(function: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["Properties"] for e in function["Properties"].get("Events", {}).values() if e["Type"] == "Api"]


# ---------------------------------------------------------------- routes


def test_every_route_of_the_table_is_an_api_event_of_exactly_its_function(template):
    functions = _functions(template)
    assert PUBLIC_FUNCTION in functions
    for name, function in functions.items():
        events = _api_events(function)
        paths = [e["Path"] for e in events]
        assert len(paths) == len(set(paths)), f"{name}: a path is routed twice: {sorted(paths)}"
        assert {e["Method"] for e in events} <= {"ANY"}, f"{name}: routes must use Method ANY (405 is ours)"
        assert all(_ref(e.get("RestApiId")) == "Api" for e in events), f"{name}: every route belongs to Api"
        expected = {path for path, route in ROUTES.items() if route.function == name}
        if name == PUBLIC_FUNCTION:
            expected |= set(PUBLIC_GET) | {CATCH_ALL}
        assert set(paths) == expected, (
            f"{name}: template routes differ from memory_hub.routes — missing {sorted(expected - set(paths))}, "
            f"extra {sorted(set(paths) - expected)}"
        )


def test_routes_of_functions_missing_from_the_template_fall_to_the_catch_all(template):
    """A route whose function is not deployed yet must not be wired to another function."""
    routed = {e["Path"]: name for name, f in _functions(template).items() for e in _api_events(f)}
    for path, route in ROUTES.items():
        if route.function not in _functions(template):
            assert path not in routed, f"{path} belongs to {route.function}, not {routed.get(path)}"


# ---------------------------------------------------------------- functions


def test_runtime_architecture_and_globals(template):
    globals_fn = template["Globals"]["Function"]
    assert globals_fn["Runtime"] == "python3.13"
    assert globals_fn["Architectures"] == ["arm64"]
    assert globals_fn["Tracing"] == "Active"
    assert globals_fn["Timeout"] <= 29, "API Gateway (REST) stops waiting after 29 s"
    env = globals_fn["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "memory-hub"
    assert env["POWERTOOLS_LOGGER_LOG_EVENT"] == "false", "events carry keys and content"
    for name, function in _functions(template).items():
        props = function["Properties"]
        assert props.get("Runtime", "python3.13") == "python3.13", name
        assert props.get("Architectures", ["arm64"]) == ["arm64"], name
    layer = template["Resources"]["CoreLayer"]["Properties"]
    assert layer["CompatibleRuntimes"] == ["python3.13"]
    assert layer["CompatibleArchitectures"] == ["arm64"]


def test_environment_names_every_table_and_the_bucket_the_settings_read(template):
    from memory_hub.settings import ENVIRONMENT, Settings

    env = template["Globals"]["Function"]["Environment"]["Variables"]
    resources = template["Resources"]
    for field in Settings.model_fields:
        if field.endswith("_table") or field == "bucket":
            variable = ENVIRONMENT[field]
            assert variable in env, f"{variable} (settings.{field}) missing from Globals"
            target = _ref(env[variable])
            assert target in resources, f"{variable} must !Ref a resource of the template"
            kind = "AWS::S3::Bucket" if field == "bucket" else "AWS::DynamoDB::Table"
            assert resources[target]["Type"] == kind, variable


def test_secrets_are_generated_and_only_their_names_reach_the_functions(template):
    """Neither the token secret nor the bootstrap admin key is a parameter or a plain variable:
    Secrets Manager generates them and the functions get their ARNs (read with Powertools)."""
    resources = template["Resources"]
    for name in ("TokenSecret", "BootstrapAdminKeySecret"):
        secret = resources[name]
        assert secret["Type"] == "AWS::SecretsManager::Secret"
        assert "GenerateSecretString" in secret["Properties"] and "SecretString" not in secret["Properties"]
    assert not any(p.get("NoEcho") for p in template["Parameters"].values()), "sam deploy asks nothing secret"
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["MEMORY_HUB_TOKEN_SECRET_ARN"] == {"Ref": "TokenSecret"}
    assert env["MEMORY_HUB_BOOTSTRAP_KEY_SECRET_ARN"] == {
        "Fn::If": ["HasBootstrapKey", {"Ref": "BootstrapAdminKeySecret"}, ""]
    }
    assert not any("KEY" in k and not k.endswith("_ARN") for k in env if k.startswith("MEMORY_HUB")), env


def test_every_function_has_its_own_log_group_with_retention(template):
    resources = template["Resources"]
    seen: set[str] = set()
    for name, function in _functions(template).items():
        group = _ref(function["Properties"].get("LoggingConfig", {}).get("LogGroup"))
        assert group is not None, f"{name}: LoggingConfig.LogGroup must !Ref a log group"
        assert group not in seen, f"{name} shares log group {group}"
        seen.add(group)
        log_group = resources[group]
        assert log_group["Type"] == "AWS::Logs::LogGroup"
        retention = log_group["Properties"].get("RetentionInDays")
        if _ref(retention):
            retention = template["Parameters"][_ref(retention)].get("Default")
        assert isinstance(retention, int) and retention > 0, f"{group}: no retention"


def test_every_function_has_error_and_throttle_alarms(template):
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    for name in _functions(template):
        metrics = {
            a["Properties"]["MetricName"]
            for a in alarms
            if a["Properties"].get("Namespace") == "AWS/Lambda"
            and {"Name": "FunctionName", "Value": {"Ref": name}} in a["Properties"].get("Dimensions", [])
        }
        assert {"Errors", "Throttles"} <= metrics, f"{name}: alarms on {sorted(metrics)}"
    for alarm in alarms:
        assert alarm["Properties"].get("AlarmActions"), "an alarm nobody hears is no alarm"


def test_every_function_has_its_handler_and_no_requirements(template):
    """The handler exists; dependencies come from CoreLayer only (and SAM's default builder then
    needs neither Docker nor a local python3.13)."""
    handler_default = template["Globals"]["Function"].get("Handler")
    for name, function in _functions(template).items():
        props = function["Properties"]
        code = ROOT / props["CodeUri"]
        module = props.get("Handler", handler_default).rsplit(".", 1)[0]
        assert (code / f"{module}.py").is_file(), f"{name}: {code}/{module}.py is missing"
        assert not (code / "requirements.txt").exists(), f"{name}: put dependencies in the layer"
        assert {"Ref": "CoreLayer"} in props.get("Layers", template["Globals"]["Function"]["Layers"])


def test_scheduled_functions_have_a_schedule_and_a_watched_dead_letter_queue(template):
    functions = _functions(template)
    assert "CleanupFunction" in functions, "the scheduled cleanup is CleanupFunction (operators invoke it by name)"
    resources = template["Resources"]
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    scheduled = {
        name: f
        for name, f in functions.items()
        if any(e["Type"] in ("Schedule", "ScheduleV2") for e in f["Properties"].get("Events", {}).values())
    }
    assert set(scheduled) == {"CleanupFunction", "EmbedFunction"}  # the drain: the test below
    for name, function in scheduled.items():
        if name == "EmbedFunction":
            continue
        props = function["Properties"]
        schedule = next(e for e in props["Events"].values() if e["Type"] in ("Schedule", "ScheduleV2"))
        assert (
            _ref(schedule["Properties"].get("Schedule") or schedule["Properties"].get("ScheduleExpression"))
            == "CleanupSchedule"
        ), "the schedule is a parameter (daily by default)"
        assert template["Parameters"]["CleanupSchedule"]["Default"] == "rate(1 day)"
        dlq = props.get("DeadLetterQueue")
        assert dlq and dlq["Type"] == "SQS", f"{name}: a failed scheduled run must not vanish"
        queue = dlq["TargetArn"]["Fn::GetAtt"][0]
        assert resources[queue]["Type"] == "AWS::SQS::Queue"
        assert any(
            {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
            in a["Properties"].get("Dimensions", [])
            for a in alarms
        ), f"nobody watches {queue}"


def test_a_drain_takes_the_waiting_vectors_queue_on_a_schedule_and_finishes_inside_its_visibility(template):
    """VectorDrainMinutes: the batched writes' waiting vectors go to VectorQueue, which only the
    schedule's runs of EmbedFunction (``{"drain": true}``) take; what a write could not embed stays on
    EmbedQueue and its event source (retried within minutes). A run ends before a message it
    received could come back, a failed run waits for the next, runs never overlap, and someone is
    told when nothing takes the queue."""
    parameter = template["Parameters"]["VectorDrainMinutes"]
    assert parameter["Default"] == 60 and 0 in parameter["AllowedValues"]
    assert template["Conditions"]["VectorsDrained"] == {
        "Fn::And": [{"Condition": "VectorsBatched"}, {"Fn::Not": [{"Fn::Equals": [{"Ref": "VectorDrainMinutes"}, 0]}]}]
    }
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["VECTOR_QUEUE_URL"] == {"Fn::If": ["VectorsDrained", {"Ref": "VectorQueue"}, ""]}
    resources = template["Resources"]
    props = resources["EmbedFunction"]["Properties"]
    events = props["Events"]
    polled = {e["Properties"]["Queue"]["Fn::GetAtt"][0]: e["Properties"] for e in events.values() if e["Type"] == "SQS"}
    assert set(polled) == {"EmbedQueue", "VectorQueue"} and "Enabled" not in polled["EmbedQueue"]
    # VectorQueue's own event source is on only when no drain takes it: what is left when it is turned off
    assert polled["VectorQueue"]["Enabled"] == {"Fn::If": ["VectorsDrained", False, True]}
    drain = events["Drain"]["Properties"]
    assert drain["State"] == {"Fn::If": ["VectorsDrained", "ENABLED", "DISABLED"]}
    assert drain["Schedule"]["Fn::If"][1] == {"Fn::Sub": "rate(${VectorDrainMinutes} minutes)"}
    assert json.loads(drain["Input"]) == {"drain": True}
    from memory_hub.domain import vector_upkeep

    _, drained_timeout, polled_timeout = props["Timeout"]["Fn::If"]
    for queue in ("EmbedQueue", "VectorQueue"):
        visibility = resources[queue]["Properties"]["VisibilityTimeout"]
        # Lambda refuses an event source whose queue's visibility is below the function's timeout;
        # and a run must end before what it received comes back
        assert vector_upkeep.ROUND_BUDGET_S + vector_upkeep.CONSUME_MIN_S < drained_timeout < visibility, queue
        dlq = resources[queue]["Properties"]["RedrivePolicy"]
        assert dlq["deadLetterTargetArn"] == {"Fn::GetAtt": ["EmbedDeadLetterQueue", "Arn"]}, queue
    assert polled_timeout < drained_timeout < min(v for v in parameter["AllowedValues"] if v) * 60, "no overlap"
    assert props["EventInvokeConfig"] == {"MaximumRetryAttempts": 0}, "a failed run waits for the next"
    retention = resources["VectorQueue"]["Properties"]["MessageRetentionPeriod"]
    receives = resources["VectorQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"]
    assert receives * max(parameter["AllowedValues"]) * 60 < retention, "a message meets its tries before it expires"
    [age] = [
        a["Properties"]
        for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == "ApproximateAgeOfOldestMessage"
        and a["Properties"]["Dimensions"]
        == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["VectorQueue", "QueueName"]}}]
    ]
    assert receives * max(parameter["AllowedValues"]) * 60 <= age["Threshold"] < retention
    assert age["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    # whoever queues embeddings may queue to both; the drain consumes both
    both = [{"Fn::GetAtt": ["EmbedQueue", "Arn"]}, {"Fn::GetAtt": ["VectorQueue", "Arn"]}]
    statements = [st for f in _functions(template).values() for st, _ in _inline_statements(f)]
    senders = [st for st in statements if st.get("Sid") == "QueueEmbeddings"]
    assert senders and all(st["Resource"] == both for st in senders)
    assert [st["Resource"] for st in statements if st.get("Sid") == "ConsumeEmbedQueue"] == [both]


SELF_INVOKING = {"ClearFunction", "TransferFunction"}  # purge and job continuations


def test_only_the_functions_that_continue_work_invoke_a_function_and_only_themselves(template):
    for name, function in _functions(template).items():
        props = function["Properties"]
        invokes = [
            s
            for p in props.get("Policies", [])
            if isinstance(p, dict) and "Statement" in p
            for s in p["Statement"]
            if any(a.startswith("lambda:") for a in _actions(s))
        ]
        if name not in SELF_INVOKING:
            assert not invokes, f"{name} may not invoke functions"
            continue
        own_name = props["FunctionName"]["Fn::Sub"]
        assert [_actions(s) for s in invokes] == [["lambda:InvokeFunction"]]
        assert _resources(invokes[0]) == [
            {"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:" + own_name}
        ]


# ---------------------------------------------------------------- IAM


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement.get("Action", [])
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[Any]:
    resource = statement.get("Resource", [])
    return resource if isinstance(resource, list) else [resource]


def _check_statement(owner: str, statement: dict[str, Any]) -> None:
    assert statement.get("Effect") == "Allow", f"{owner}: {statement}"
    assert "NotAction" not in statement and "NotResource" not in statement, owner
    for action in _actions(statement):
        assert action != "*" and not action.endswith(":*"), f"{owner}: wildcard action {action}"
    resources = _resources(statement)
    assert resources, f"{owner}: statement without Resource"
    for resource in resources:
        text = json.dumps(resource)
        assert resource != "*" and '":::*' not in text and text.strip('"') != "*", f"{owner}: {resource}"
    s3_object_actions = [a for a in _actions(statement) if a.startswith("s3:") and "Object" in a]
    if s3_object_actions:
        assert (
            len(resources) == 1
            and str(resources[0].get("Fn::Sub", "")).startswith("${MemoryBucket.Arn}/profiles/")
            and (resources[0]["Fn::Sub"].endswith("/*") or "*" not in resources[0]["Fn::Sub"].rsplit("/", 1)[1])
        ), f"{owner}: S3 object access is scoped to the bucket's profiles/ prefix (a folder, or one object's name)"
    if "s3:ListBucket" in _actions(statement):
        assert resources == [{"Fn::GetAtt": ["MemoryBucket", "Arn"]}], owner


def test_no_function_has_a_wildcard_or_admin_like_policy(template):
    resources = template["Resources"]
    for name, function in _functions(template).items():
        props = function["Properties"]
        assert "Role" not in props, f"{name}: a role made elsewhere escapes this check"
        policies = props.get("Policies", [])
        assert isinstance(policies, list) and policies, f"{name}: no policies"
        for policy in policies:
            if isinstance(policy, str):
                assert not BROAD_MANAGED_POLICY.search(policy), f"{name}: {policy}"
                pytest.fail(f"{name}: managed policy {policy}: use a policy template or a scoped statement")
            assert len(policy) == 1, f"{name}: {policy}"
            ((kind, value),) = policy.items()
            if kind == "Statement":
                for statement in value:
                    if "Fn::If" in statement:  # a statement present only under a condition
                        statement = statement["Fn::If"][1]
                    _check_statement(name, statement)
                continue
            assert kind in SAM_POLICY_TEMPLATES, f"{name}: policy {kind} is not on the allowed list"
            target = _ref(value.get(SAM_POLICY_TEMPLATES[kind]))
            assert target in resources, f"{name}: {kind} must name a resource of this template"
    assert "Policies" not in template["Globals"]["Function"]
    for name in list(_of_type(template, "AWS::IAM::Policy")) + list(_of_type(template, "AWS::IAM::ManagedPolicy")):
        for statement in resources[name]["Properties"]["PolicyDocument"]["Statement"]:
            _check_statement(name, statement)


def test_only_data_plane_writers_get_crud_on_content(template):
    """Readers of a table get read templates; CRUD only where the code deletes."""
    functions = _functions(template)

    def grants(name: str, table: str) -> set[str]:
        return {
            kind
            for p in functions[name]["Properties"]["Policies"]
            if isinstance(p, dict)
            for kind, value in p.items()
            if kind in SAM_POLICY_TEMPLATES and _ref(value.get("TableName")) == table
        }

    assert grants("MemoryFunction", "ItemsTable") == {"DynamoDBCrudPolicy"}
    assert grants("MemoryFunction", "IdempotencyTable") == {"DynamoDBCrudPolicy"}
    for name in functions:
        assert "DynamoDBCrudPolicy" not in grants(name, "KeysTable"), f"{name}: keys are never deleted"
        assert "DynamoDBCrudPolicy" not in grants(name, "AuditTable"), f"{name}: audit events are never deleted here"
        if name != "AdminFunction":
            assert grants(name, "KeysTable") <= {"DynamoDBReadPolicy"}, name


# ---------------------------------------------------------------- storage


def test_bucket_blocks_public_access_encrypts_and_denies_plain_http(template):
    buckets = _of_type(template, "AWS::S3::Bucket")
    assert buckets
    policies = _of_type(template, "AWS::S3::BucketPolicy").values()
    for name, bucket in buckets.items():
        props = bucket["Properties"]
        block = props["PublicAccessBlockConfiguration"]
        assert all(
            block.get(k) is True
            for k in ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
        ), name
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"], name
        statements = [
            s
            for p in policies
            if _ref(p["Properties"]["Bucket"]) == name
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        tls = [
            s
            for s in statements
            if s.get("Effect") == "Deny"
            and s.get("Principal") == "*"
            and "s3:*" in _actions(s)
            and str(s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")).lower() == "false"
        ]
        assert tls, f"{name}: no Deny of requests without TLS"
        covered = _resources(tls[0])
        assert {"Fn::GetAtt": [name, "Arn"]} in covered and {"Fn::Sub": f"${{{name}.Arn}}/*"} in covered


def test_tables_are_on_demand_and_encrypted(template):
    tables = _of_type(template, "AWS::DynamoDB::Table")
    assert {"AssetsTable", "ItemsTable", "ScenesTable", "KeysTable", "AuditTable", "IdempotencyTable"} <= set(tables)
    for name, table in tables.items():
        props = table["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST", name
        assert props["SSESpecification"]["SSEEnabled"] is True, name
        if name != "IdempotencyTable":  # one-hour records, expired by TTL
            assert table.get("DeletionPolicy") == "Retain" == table.get("UpdateReplacePolicy"), name
        recovery = props.get("PointInTimeRecoverySpecification")
        if name in ("AssetsTable", "ItemsTable", "ScenesTable"):  # memory: backups set the erasure horizon
            assert recovery == {
                "Fn::If": [
                    "KeepBackups",
                    {"PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": {"Ref": "PointInTimeRecoveryDays"}},
                    {"PointInTimeRecoveryEnabled": False},
                ]
            }, name
    assert template["Parameters"]["PointInTimeRecoveryDays"]["Default"] == 0
    assert template["Parameters"]["PointInTimeRecoveryDays"]["MaxValue"] == 35


def test_items_table_has_the_three_local_indexes(template):
    props = template["Resources"]["ItemsTable"]["Properties"]
    assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} == {
        ("pk", "S"),
        ("sk", "S"),
        ("lsi1", "S"),
        ("lsi2", "S"),
        ("lsi3", "S"),
    }
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    indexes = {i["IndexName"]: i for i in props["LocalSecondaryIndexes"]}
    assert set(indexes) == {"by-time", "by-session", "by-term"}
    for name, sort_key in (("by-time", "lsi1"), ("by-session", "lsi2"), ("by-term", "lsi3")):
        assert indexes[name]["KeySchema"] == [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": sort_key, "KeyType": "RANGE"},
        ]
        assert indexes[name]["Projection"] == {"ProjectionType": "ALL"}


def _key_set(schema: list[dict[str, str]]) -> set[tuple[str, str]]:
    return {(k["AttributeName"], k["KeyType"]) for k in schema}


def test_tables_match_the_pynamodb_models(template):
    """The schema the code queries is the schema that gets deployed (and that moto creates)."""
    from memory_hub.settings import ENVIRONMENT
    from memory_hub.storage.models import TABLE_MODELS

    env = template["Globals"]["Function"]["Environment"]["Variables"]
    for field, models in TABLE_MODELS.items():
        table_id = _ref(env[ENVIRONMENT[field]])
        props = template["Resources"][table_id]["Properties"]
        _check_models_against(table_id, props, models)


def _check_models_against(table_id: str, props: dict[str, Any], models: tuple[Any, ...]) -> None:
    """Every model of a table has its keys; together they declare exactly the table's attributes
    and indexes (several models may share a table, each declaring the indexes it queries)."""
    declared = {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]}
    needed: set[tuple[str, str]] = set()
    indexes: dict[str, dict[str, Any]] = {"GlobalSecondaryIndexes": {}, "LocalSecondaryIndexes": {}}
    for model in models:
        schema = model._get_schema()
        assert _key_set(props["KeySchema"]) == _key_set(schema["key_schema"]), (table_id, model.__name__)
        needed |= {(a["AttributeName"], a["AttributeType"]) for a in schema["attribute_definitions"]}
        for kind, key in (
            ("GlobalSecondaryIndexes", "global_secondary_indexes"),
            ("LocalSecondaryIndexes", "local_secondary_indexes"),
        ):
            for i in schema[key]:
                indexes[kind][i["index_name"]] = (_key_set(i["key_schema"]), i["projection"]["ProjectionType"])
    assert declared == needed, f"{table_id}: AttributeDefinitions {sorted(declared)} != {sorted(needed)}"
    for kind, modelled in indexes.items():
        deployed = {
            i["IndexName"]: (_key_set(i["KeySchema"]), i["Projection"]["ProjectionType"]) for i in props.get(kind, [])
        }
        assert deployed == modelled, f"{table_id}.{kind}: {deployed} != {modelled}"


# ---------------------------------------------------------------- API Gateway's own answers

REQUIRED_GATEWAY_RESPONSES = {
    "MISSING_AUTHENTICATION_TOKEN": 404,
    "ACCESS_DENIED": 403,
    "UNAUTHORIZED": 401,
    "THROTTLED": 429,
    "REQUEST_TOO_LARGE": 413,
    "DEFAULT_4XX": 400,
    "DEFAULT_5XX": 500,
    "INTEGRATION_TIMEOUT": 504,
}


def _render(template_text: str) -> Any:
    """What API Gateway sends: plain variable substitution ($context.error.messageString is quoted)."""
    text = template_text.replace("$context.requestId", "6f1c2a7e-0b9d-4c1e-9a53-2f7d8e4b1c00")
    text = text.replace("$context.error.messageString", json.dumps('Invalid request "body"'))
    assert "$" not in text, f"unsupported variable left in {template_text}"
    return json.loads(text)


def test_gateway_responses_use_the_envelope_with_a_fixed_status(template):
    responses = template["Resources"]["Api"]["Properties"]["GatewayResponses"]
    assert set(REQUIRED_GATEWAY_RESPONSES) <= set(responses)
    for kind, response in responses.items():
        status = int(response["StatusCode"])
        if kind in REQUIRED_GATEWAY_RESPONSES:
            assert status == REQUIRED_GATEWAY_RESPONSES[kind], kind
        assert set(response["ResponseTemplates"]) == {"application/json"}, kind
        raw = response["ResponseTemplates"]["application/json"]
        assert not re.search(r"#(set|if|foreach)|\$util|\$input|\.length\(\)", raw), f"{kind}: no VTL here"
        body = _render(raw)
        assert body["code"] == status and isinstance(body["code"], int), kind
        assert isinstance(body["message"], str) and body["message"], kind
        assert body["request_id"].startswith("req-"), kind
        if status in (429, 500, 502, 503, 504):
            assert body.get("retryable") is True, kind
        else:
            assert body.get("retryable") in (None, False), kind
    assert _render(responses["MISSING_AUTHENTICATION_TOKEN"]["ResponseTemplates"]["application/json"])[
        "message"
    ].startswith("no route")
    assert (
        _render(responses["DEFAULT_5XX"]["ResponseTemplates"]["application/json"])["message"] == "Internal server error"
    )


# ---------------------------------------------------------------- layer and build


def test_layer_builds_from_the_locked_runtime_set():
    """SAM builds the layer in a scratch copy of layers/core: it installs the copy of the runtime
    lock kept there, which must be requirements/runtime.txt byte for byte, every line hashed."""
    lock = (ROOT / "requirements/runtime.txt").read_text()
    assert (ROOT / "layers/core/requirements.txt").read_text() == lock, (
        "cp requirements/runtime.txt layers/core/requirements.txt"
    )
    pinned = [line for line in lock.splitlines() if re.match(r"^[A-Za-z0-9_.-]+==", line)]
    assert pinned and all(line.endswith("\\") for line in pinned), "every requirement pinned with hashes"
    assert "--require-hashes" in (ROOT / "layers/core/Makefile").read_text()


def test_layer_is_built_by_its_makefile(template):
    layer = template["Resources"]["CoreLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    content = ROOT / layer["Properties"]["ContentUri"]
    makefile = (content / "Makefile").read_text()
    assert re.search(r"^build-CoreLayer:", makefile, re.MULTILINE)
    assert "manylinux2014_aarch64" in makefile and "--python-version 3.13" in makefile
    assert "-r requirements.txt" in makefile and (content / "requirements.txt").is_file()
    assert (content / "python/memory_hub/__init__.py").is_file(), "layer code lives under python/"


def test_outputs_have_stable_export_names(template):
    outputs = template["Outputs"]
    assert {"ApiUrl", "BucketName", "AssetsTableName", "ItemsTableName"} <= set(outputs)
    for name, output in outputs.items():
        export = output["Export"]["Name"]
        assert re.fullmatch(r"\$\{AWS::StackName\}-[A-Za-z]+", export["Fn::Sub"]), name


# ---------------------------------------------------------------- linters


def _cfn_lint() -> str | None:
    for candidate in (Path(sys.executable).parent / "cfn-lint", ROOT / ".venv/bin/cfn-lint"):
        if candidate.is_file():
            return str(candidate)
    return shutil.which("cfn-lint")


def test_cfn_lint_is_clean():
    cfn_lint = _cfn_lint()
    if cfn_lint is None:
        pytest.skip("cfn-lint is not installed (make .venv/.installed)")
    result = subprocess.run([cfn_lint, str(TEMPLATE)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_api_writes_access_logs_without_bodies_keys_or_content(template):
    api = template["Resources"]["Api"]["Properties"]
    setting = api["AccessLogSetting"]
    destination = setting["DestinationArn"]["Fn::GetAtt"][0]
    assert template["Resources"][destination]["Type"] == "AWS::Logs::LogGroup"
    assert template["Resources"][destination]["Properties"].get("RetentionInDays"), "access logs age out"
    fields = json.loads(setting["Format"])
    assert {"requestId", "status", "path", "latencyMs"} <= set(fields)
    variables = " ".join(fields.values())
    for leaked in ("requestBody", "responseBody", "Authorization", "authorizer", "apiKey", "header", "querystring"):
        assert leaked.lower() not in variables.lower(), leaked
    assert api["MethodSettings"][0]["ThrottlingRateLimit"] > 0, "the stage bounds concurrency when none is reserved"


# ---------------------------------------------------------------- meaning (embeddings and vectors)

# What each function does with meaning, and so the only S3 Vectors / Bedrock / SQS actions it holds.
RECALL_ACTIONS = {
    "MemoryFunction": {
        "bedrock:InvokeModel",
        "s3vectors:PutVectors",
        "s3vectors:CreateIndex",
        "s3vectors:UpdateIndexMode",  # a words index is made ENHANCED
        "s3vectors:DeleteVectors",
        "s3vectors:QueryVectors",
        "s3vectors:GetVectors",  # QueryVectors with a metadata filter needs it
        "s3vectors:ListIndexes",
        "sqs:SendMessage",
    },
    "DeleteFunction": {"s3vectors:DeleteVectors", "s3vectors:ListIndexes", "sqs:SendMessage"},
    "ClearFunction": {"s3vectors:DeleteIndex", "s3vectors:ListIndexes"},
    "TransferFunction": {
        "bedrock:InvokeModel",
        "s3vectors:PutVectors",
        "s3vectors:CreateIndex",
        "s3vectors:UpdateIndexMode",  # a words index is made ENHANCED
        "s3vectors:DeleteVectors",
        "s3vectors:DeleteIndex",  # a failed import drops a memory it created, index and all
        "s3vectors:ListIndexes",
        "sqs:SendMessage",
    },
    "CleanupFunction": {
        "bedrock:InvokeModel",
        "s3vectors:PutVectors",
        "s3vectors:CreateIndex",
        "s3vectors:UpdateIndexMode",  # a words index is made ENHANCED
        "s3vectors:DeleteVectors",
        "s3vectors:ListVectors",
        "s3vectors:GetVectors",  # ListVectors with metadata needs it
        "s3vectors:DeleteIndex",
        "s3vectors:ListIndexes",
        "sqs:SendMessage",
    },
    "EmbedFunction": {
        "bedrock:InvokeModel",
        "s3vectors:PutVectors",
        "s3vectors:CreateIndex",
        "s3vectors:UpdateIndexMode",  # a words index is made ENHANCED
        "s3vectors:DeleteVectors",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ChangeMessageVisibility",
    },
    "FormationFunction": {
        "bedrock:InvokeModel",  # the formation model (Converse), and the embeddings of what it forms
        "s3vectors:PutVectors",
        "s3vectors:CreateIndex",
        "s3vectors:UpdateIndexMode",  # a words index is made ENHANCED
        "s3vectors:DeleteVectors",
        "s3vectors:QueryVectors",  # the user's similar records, found by meaning too
        "s3vectors:GetVectors",
        "s3vectors:ListIndexes",
        "sqs:SendMessage",  # embeddings to queue, and runs to queue again (backoff, continuation)
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ChangeMessageVisibility",
    },
}
# The queues each function may use (by logical id), and what for.
QUEUES = {  # embeddings (and the drain's waiting vectors); formation runs after an add
    "MemoryFunction": {"EmbedQueue", "VectorQueue", "FormationQueue"},
    "TransferFunction": {"EmbedQueue", "VectorQueue", "FormationQueue"},
    "DeleteFunction": {"FormationQueue"},  # a removed formed file is formed again
    "EmbedFunction": {"EmbedQueue", "VectorQueue"},
    "FormationFunction": {"EmbedQueue", "VectorQueue", "FormationQueue"},
    "CleanupFunction": {"FormationQueue"},  # an abandoned import's undo may remove formed files
}
VECTOR_BUCKETS = [f"VectorBucket{i}" for i in range(16)]
UNNAMED_BUCKETS = VECTOR_BUCKETS[:4]  # the stack's buckets of before: CloudFormation names them
STACK_UUID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
NAMED = "arn:${AWS::Partition}:s3vectors:${AWS::Region}:${AWS::AccountId}:bucket/mh-${Stack}-v*"


def _inline_statements(function: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    """(statement, condition it depends on) of a function's inline statements."""
    found = []
    for policy in function["Properties"].get("Policies", []):
        if isinstance(policy, dict) and "Statement" in policy:
            for statement in policy["Statement"]:
                if "Fn::If" in statement:
                    condition, statement = statement["Fn::If"][0], statement["Fn::If"][1]
                    found.append((statement, condition))
                else:
                    found.append((statement, None))
    return found


def _action_list(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_meaning_is_least_privilege_per_function(template):
    for name, function in _functions(template).items():
        held = {
            a
            for statement, _ in _inline_statements(function)
            for a in _action_list(statement)
            if a.split(":")[0] in ("bedrock", "s3vectors", "sqs")
        }
        assert held == RECALL_ACTIONS.get(name, set()), f"{name}: {sorted(held)}"


def test_bedrock_is_the_configured_foundation_model_only_and_only_with_embeddings_on(template):
    """The embedding model with Embeddings on; the formation model (by its foundation-model or
    inference-profile ARN) only in the FormationFunction, with Formation on."""
    for name, function in _functions(template).items():
        for statement, condition in _inline_statements(function):
            if "bedrock:InvokeModel" not in _action_list(statement):
                continue
            assert _action_list(statement) == ["bedrock:InvokeModel"]
            if statement.get("Sid") == "Converse":
                assert name == "FormationFunction" and condition == "FormationEnabled", name
                assert statement["Resource"] == [
                    {"Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${FormationModel}"},
                    {
                        "Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:"
                        "inference-profile/${FormationModel}"
                    },
                ]
                continue
            assert condition == "EmbeddingsEnabled", f"{name}: Bedrock without the Embeddings condition"
            assert statement["Resource"] == {
                "Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${EmbeddingModel}"
            }


def test_vector_actions_name_only_the_stacks_vector_buckets_and_their_indexes(template):
    buckets = [{"Fn::GetAtt": [b, "VectorBucketArn"]} for b in UNNAMED_BUCKETS]
    buckets.append({"Fn::Sub": [NAMED, {"Stack": STACK_UUID}]})
    indexes = [{"Fn::Sub": f"${{{b}.VectorBucketArn}}/index/*"} for b in UNNAMED_BUCKETS]
    indexes.append({"Fn::Sub": [NAMED + "/index/*", {"Stack": STACK_UUID}]})
    for name, function in _functions(template).items():
        for statement, _ in _inline_statements(function):
            actions = [a for a in _action_list(statement) if a.startswith("s3vectors:")]
            if not actions:
                continue
            assert len(actions) == len(_action_list(statement)), f"{name}: mixed statement"
            expected = buckets if actions == ["s3vectors:ListIndexes"] else indexes
            assert statement["Resource"] == expected, f"{name}: {actions} on {statement['Resource']}"
            assert "s3vectors:ListIndexes" not in actions or actions == ["s3vectors:ListIndexes"]
        queues = set()
        for statement, _ in _inline_statements(function):
            if any(a.startswith("sqs:") for a in _action_list(statement)):
                named = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                for resource in named:
                    assert isinstance(resource, dict) and resource["Fn::GetAtt"][1] == "Arn", name
                    queues.add(resource["Fn::GetAtt"][0])
        assert queues == QUEUES.get(name, set()), f"{name}: {sorted(queues)}"


def test_the_vector_buckets_after_the_first_four_are_named_after_the_stack_and_only_they_match_its_policies(
    template,
):
    """Buckets 4 and up carry the stack's id in their names, so one policy entry names them all
    (and no other stack's); the first four keep CloudFormation's names (renaming them would replace
    them, and their vectors with them)."""
    from memory_hub_local.template import deploy, local_names

    resources = template["Resources"]
    for logical_id in UNNAMED_BUCKETS:
        assert "VectorBucketName" not in resources[logical_id].get("Properties", {}), logical_id
    for i, logical_id in enumerate(VECTOR_BUCKETS[4:], start=4):
        assert resources[logical_id]["Properties"]["VectorBucketName"] == {
            "Fn::Sub": [f"mh-${{Stack}}-v{i}", {"Stack": STACK_UUID}]
        }
        assert resources[logical_id]["DeletionPolicy"] == resources[logical_id]["UpdateReplacePolicy"] == "Retain"
    names, arns = local_names("us-east-1", {})
    memory = deploy("us-east-1", {}).functions["MemoryFunction"]
    for logical_id in VECTOR_BUCKETS:
        assert 3 <= len(names[logical_id]) <= 63 and names[logical_id] == names[logical_id].lower()
        assert memory.allows("s3vectors:QueryVectors", arns[logical_id] + "/index/m0-1-3")
        assert memory.allows("s3vectors:ListIndexes", arns[logical_id])
    assert len(set(names[b] for b in VECTOR_BUCKETS)) == len(VECTOR_BUCKETS)
    another = arns["VectorBucket4"].replace("-0000-4000-", "-0000-4001-")  # another stack's bucket 4
    assert not memory.allows("s3vectors:QueryVectors", another + "/index/m0-1-3")
    assert not memory.allows("s3vectors:ListIndexes", another)


def test_every_functions_environment_fits_lambdas_4_kb_with_awss_longer_names():
    """Lambda allows 4 KB of environment variables a function (names and values). The local stack's
    physical names are short; on AWS a generated name carries the stack's name and a random suffix:
    each variable that holds a name, ARN or URL is counted here 80 characters longer (a stack name
    of 40 characters), and the vector buckets' names as AWS would give them."""
    from memory_hub_local.template import deploy

    for name, function in deploy("ap-southeast-2", {}).functions.items():
        env = function.environment
        longer = sum(
            80 for value in env.values() if any(m in str(value) for m in ("arn:", "https://", "Table", "local"))
        )
        entries = str(env["VECTOR_BUCKETS"]).split(",")  # each at S3 Vectors' longest name (an ARN's prefix kept)
        buckets = sum(len(b) - len(b.rsplit("bucket/", 1)[-1]) + 63 for b in entries) + len(entries)
        size = sum(len(k) + len(str(v)) for k, v in env.items() if k != "VECTOR_BUCKETS") + buckets + longer
        assert size <= 4096, f"{name}: {size} bytes"


def test_meaning_parameters_buckets_and_queue(template):
    params = template["Parameters"]
    assert params["Embeddings"]["AllowedValues"] == ["Enabled", "Disabled"]
    assert params["EmbeddingModel"]["Default"] == "amazon.titan-embed-text-v2:0"
    assert params["EmbeddingDimensions"]["Default"] == 1024
    assert template["Conditions"]["EmbeddingsEnabled"] == {"Fn::Equals": [{"Ref": "Embeddings"}, "Enabled"]}
    assert sorted(_of_type(template, "AWS::S3Vectors::VectorBucket")) == sorted(VECTOR_BUCKETS)
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["EMBEDDINGS"] == {"Ref": "Embeddings"}
    assert env["EMBEDDING_MODEL"] == {"Ref": "EmbeddingModel"}
    assert env["EMBEDDING_DIMENSIONS"] == {"Ref": "EmbeddingDimensions"}
    assert env["EMBED_QUEUE_URL"] == {"Ref": "EmbedQueue"}
    assert env["VECTOR_BUCKETS"]["Fn::Join"][1] == [
        {"Fn::Select": [1, {"Fn::Split": ["bucket/", {"Fn::GetAtt": [b, "VectorBucketArn"]}]}]} for b in VECTOR_BUCKETS
    ]  # the names, in order (a GetAtt each: a function comes after its buckets)
    queue = template["Resources"]["EmbedQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["EmbedDeadLetterQueue", "Arn"]}
    longest_window = template["Parameters"]["VectorBatchSeconds"]["MaxValue"]
    _, _, event_source_timeout = template["Resources"]["EmbedFunction"]["Properties"]["Timeout"]["Fn::If"]
    assert queue["VisibilityTimeout"] >= 6 * event_source_timeout + longest_window
    event = template["Resources"]["EmbedFunction"]["Properties"]["Events"]["Queue"]
    assert event["Type"] == "SQS" and event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # VectorWrites: Batched by default, gathering up to 100 writes for VectorBatchSeconds (Lambda's
    # longest window, 300 s, by default: the window the bench prices), their vectors waiting in
    # ItemsTable meanwhile, which only EmbedFunction's batch writes delete; the local stack stays
    # Immediate unless told (its vectors are in the emulated S3 Vectors as each write answers)
    from memory_hub_bench.cost import BATCH_WINDOW_S
    from memory_hub_local.stack import LOCAL_DEFAULTS, environment_parameters

    assert params["VectorWrites"]["Default"] == "Batched" and env["VECTOR_WRITES"] == {"Ref": "VectorWrites"}
    assert params["VectorBatchSeconds"]["MaxValue"] == params["VectorBatchSeconds"]["Default"] == 300
    assert params["VectorBatchSeconds"]["Default"] == BATCH_WINDOW_S
    deletes = ["dynamodb:DeleteItem", "dynamodb:BatchWriteItem"]
    assert {"Sid": "DeleteWaitingVectors", "Effect": "Allow", "Action": deletes,
            "Resource": {"Fn::GetAtt": ["ItemsTable", "Arn"]}} in [s for s, _ in _inline_statements(
                template["Resources"]["EmbedFunction"])]  # fmt: skip
    assert LOCAL_DEFAULTS == {"VectorWrites": "Immediate"}
    assert environment_parameters({})["VectorWrites"] == "Immediate"
    assert environment_parameters({"MEMORY_HUB_VECTOR_WRITES": "Batched"})["VectorWrites"] == "Batched"
    assert event["Properties"]["BatchSize"] == {"Fn::If": ["VectorsBatched", 100, 10]}
    assert event["Properties"]["MaximumBatchingWindowInSeconds"] == {
        "Fn::If": ["VectorsBatched", {"Ref": "VectorBatchSeconds"}, 1]
    }
    # VectorGroups: the code's range, reaching every function, and the default the bench prices
    from memory_hub.settings import Settings
    from memory_hub.storage import vectors
    from memory_hub_bench import cost

    bound = {m.__class__.__name__: m for m in Settings.model_fields["vector_groups"].metadata}
    assert (params["VectorGroups"]["MinValue"], params["VectorGroups"]["MaxValue"]) == (1, vectors.MAX_GROUPS)
    assert (bound["Ge"].ge, bound["Le"].le) == (1, vectors.MAX_GROUPS)
    assert env["VECTOR_GROUPS"] == {"Ref": "VectorGroups"} and params["VectorGroups"]["Default"] == cost.GROUPS
    from memory_hub.domain import vector_upkeep

    assert params["VectorDrainMinutes"]["Default"] == cost.DRAIN_MINUTES, "the bench prices the default drain"
    assert tuple(v for v in params["VectorDrainMinutes"]["AllowedValues"] if v) == cost.DRAIN_CHOICES
    assert cost.DRAIN_ROUND == vector_upkeep.DRAIN_ROUND


def test_a_full_vector_bucket_is_alarmed_on_the_metric_the_functions_count(template, capsys):
    """Each refusal of a new index by a full bucket is counted (``vectors.INDEX_QUOTA_METRIC``),
    and an alarm watches that very metric: the namespace and dimensions the count is emitted with."""
    from memory_hub.storage import vectors

    capsys.readouterr()
    observability.count_event(vectors.INDEX_QUOTA_METRIC)
    [emitted] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    [directive] = emitted["_aws"]["CloudWatchMetrics"]
    assert [m["Name"] for m in directive["Metrics"]] == [vectors.INDEX_QUOTA_METRIC]
    [alarm] = [
        a["Properties"]
        for a in _of_type(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == vectors.INDEX_QUOTA_METRIC
    ]
    assert alarm["Namespace"] == directive["Namespace"]
    assert alarm["Dimensions"] == [
        {"Name": d, "Value": emitted[d]} for [*names] in directive["Dimensions"] for d in names
    ]
    assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
