"""The deployed path: every function as Lambda runs it — a fresh process per execution environment,
the handler named in template.yaml, ONLY the template's environment (intrinsics resolved) plus the
variables Lambda sets, the layer and the runtime libraries on the path — against PLAIN moto (a moto
server with none of the local stack's patches, IAM or limits). Nothing here goes through the local
stack's set-up: a function that only works because the local stack prepared something fails here.

The events of events/ are replayed in order (writes before the reads that see them), then the
scheduled cleanup event."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

import boto3
import pytest
from events_replay import EVENTS, replay
from helpers import ADMIN_KEY

REGION = "us-east-1"


@pytest.fixture(scope="module")
def plain_aws():
    """A moto server exactly as moto ships it, holding the template's resources."""
    from memory_hub_local.template import expanded, local_names
    from moto.server import ThreadedMotoServer

    for name, value in {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        os.environ.setdefault(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    cfn = expanded(REGION)
    names, _ = local_names(REGION, {})
    dynamodb = boto3.client("dynamodb", endpoint_url=url, region_name=REGION)
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] == "AWS::DynamoDB::Table":
            props = resource["Properties"]
            args: dict[str, Any] = {
                "TableName": names[logical_id],
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": props["AttributeDefinitions"],
                "KeySchema": props["KeySchema"],
            }
            for indexes in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
                if props.get(indexes):
                    args[indexes] = props[indexes]
            dynamodb.create_table(**args)
    boto3.client("s3", endpoint_url=url, region_name=REGION).create_bucket(Bucket=names["MemoryBucket"])
    # What CloudFormation creates besides: the vector buckets and the queues (plain moto keeps
    # vectors but has no QueryVectors and no Bedrock: meaning must give way to words cleanly).
    vectors = boto3.client("s3vectors", endpoint_url=url, region_name=REGION)
    sqs = boto3.client("sqs", endpoint_url=url, region_name=REGION)
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] == "AWS::S3Vectors::VectorBucket":
            vectors.create_vector_bucket(vectorBucketName=names[logical_id])
        elif resource["Type"] == "AWS::SQS::Queue":
            sqs.create_queue(QueueName=names[logical_id])
    manager = boto3.client("secretsmanager", endpoint_url=url, region_name=REGION)
    secret_arns = {
        "TokenSecret": manager.create_secret(Name="TokenSecret", SecretString=secrets.token_urlsafe(48))["ARN"],
        "BootstrapAdminKeySecret": manager.create_secret(Name="BootstrapAdminKeySecret", SecretString=ADMIN_KEY)["ARN"],
    }
    yield url, secret_arns
    server.stop()


@pytest.fixture(scope="module")
def functions(plain_aws, tmp_path_factory):
    from memory_hub_local.functions import FunctionPool
    from memory_hub_local.template import deploy

    url, secret_arns = plain_aws
    log = (tmp_path_factory.mktemp("deployed") / "functions.log").open("wb")
    # Formation on, as a deployment that forms memory has it (its routes answer; plain moto has no
    # Bedrock, so a run meets a model that is not there — and says so in formation/status).
    deployment = deploy(REGION, secret_arns, {"Formation": "Enabled"})
    pool = FunctionPool(deployment, aws_endpoint=url, lambda_endpoint="http://127.0.0.1:9", log=log)
    yield pool
    pool.close()
    log.close()


def _function_of(pool: Any) -> Any:
    exact = {path: f.logical_id for f in pool.deployment.functions.values() for path, _ in f.routes}
    return lambda path: exact.get(path) or exact["/{proxy+}"]


def test_each_function_starts_with_only_the_template_environment(functions):
    """The environment a function gets holds the template's variables, Lambda's own, and (locally)
    the AWS endpoint — no setting the local stack would have to provide."""
    for function in functions.deployment.functions.values():
        env = functions.environment_of(function)
        extra = set(env) - set(function.environment)
        lambda_set = {
            "PATH",
            "LANG",
            "TZ",
            "LAMBDA_TASK_ROOT",
            "LAMBDA_RUNTIME_DIR",
            "_HANDLER",
            "AWS_EXECUTION_ENV",
            "AWS_LAMBDA_FUNCTION_NAME",
            "AWS_LAMBDA_FUNCTION_VERSION",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            "AWS_LAMBDA_LOG_GROUP_NAME",
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "AWS_LAMBDA_INITIALIZATION_TYPE",
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        }
        assert extra <= lambda_set | {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_LAMBDA"}, (function.logical_id, extra)
        assert not any(name.startswith("MEMORY_HUB") and name not in function.environment for name in env)


def test_a_missing_setting_fails_the_cold_start_naming_the_variable(functions):
    from memory_hub_local.functions import Environment, InvocationError

    function = functions.deployment.functions["ScenarioFunction"]
    env = functions.environment_of(function)
    del env["ITEMS_TABLE"]
    environment = Environment(
        function, env, [str(function.code_uri), *map(str, function.layers), *functions.paths_tail], None
    )
    with pytest.raises(InvocationError) as failure:
        environment.start()
    assert failure.value.kind == "Init" and "ITEMS_TABLE is not set" in failure.value.error["errorMessage"]


def test_every_event_replays_through_its_function_as_deployed(functions):
    def invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
        outcome = functions.invoke(function, event)
        assert outcome.error is None, f"{function} failed: {outcome.error}"
        return outcome.result

    failures = replay(invoke, _function_of(functions))
    assert not failures, "\n".join(failures)


def test_the_scheduled_cleanup_runs_as_deployed(functions):
    event = json.loads((EVENTS / "scheduled" / "cleanup.json").read_text())
    outcome = functions.invoke("CleanupFunction", event)
    assert outcome.error is None, outcome.error
    assert outcome.result["done"] is True and outcome.result["skipped"] is None


def test_the_embedding_queue_consumer_runs_as_deployed(functions):
    """An SQS batch naming an item that no longer exists: nothing to embed, nothing to retry."""
    event = json.loads((EVENTS / "queued" / "embed.json").read_text())
    outcome = functions.invoke("EmbedFunction", event)
    assert outcome.error is None, outcome.error
    assert outcome.result == {"batchItemFailures": []}


def _api(functions: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    from memory_hub_local.gateway import api_event

    headers = {"Authorization": f"Bearer {ADMIN_KEY}", "x-tdai-service-id": "default"}
    event = api_event("POST", path, headers, json.dumps(body).encode(), resource=path)
    outcome = functions.invoke(_function_of(functions)(path), event)
    assert outcome.error is None, outcome.error
    answer = json.loads(outcome.result["body"])
    assert answer["code"] == 0, answer
    return dict(answer["data"])


def test_a_formation_run_runs_as_deployed(functions, plain_aws):
    """A user's batch, the FormationFunction invoked with the queue's event: it takes the lease,
    reads the batch again and calls Converse — which plain moto does not have — so the run records
    a model failure in the user's state (no content), keeps every message waiting, and queues
    itself again; the queue's consumer answers without a failed item."""
    isolation = {"team_id": "deployed-formation", "agent_id": "a", "user_id": "u1"}
    messages = [{"role": "user", "content": f"fact {i}"} for i in range(3)]
    _api(functions, "/v3/conversation/add", dict(isolation, session_id="s1", messages=messages))
    assert _api(functions, "/v3/formation/status", isolation)["pending_messages"] == 3
    url, _ = plain_aws
    assets = boto3.client("dynamodb", endpoint_url=url, region_name=REGION)
    table = functions.deployment.names["AssetsTable"]
    (epoch,) = [
        int(item["epoch"]["N"])
        for item in assets.scan(TableName=table)["Items"]
        if item.get("team_id", {}).get("S") == "deployed-formation" and "epoch" in item
    ]
    body = {**isolation, "epoch": epoch, "session_id": "s1", "task_id": None, "kind": "run"}
    event = {"Records": [{"messageId": "m-1", "body": json.dumps(body), "eventSource": "aws:sqs"}]}
    outcome = functions.invoke("FormationFunction", event)
    assert outcome.error is None, outcome.error
    assert outcome.result == {"batchItemFailures": []}
    state = _api(functions, "/v3/formation/status", isolation)
    assert state["pending_messages"] == 3 and state["records_formed"] == 0
    assert state["last_error"] is not None and state["last_error"]["kind"] in ("model_unavailable", "other")


def test_functions_import_nothing_of_the_local_stack(functions):
    """The runtime path holds the function, the layer and the locked runtime libraries only."""
    tail = Path(functions.paths_tail[0])
    names = {p.name for p in tail.iterdir()}
    assert not any(
        n.startswith(("moto", "memory_hub_local", "memory_hub_tools", "yaml", "samtranslator")) for n in names
    ), names
    assert {"boto3", "botocore", "pynamodb", "pydantic", "aws_lambda_powertools"} <= names


def test_the_console_and_every_module_are_served_as_deployed(functions):
    """Through the catch-all route, as API Gateway sends a browser's GET: the page, each of its ES
    modules (a file of the layer, or the field rules the API renders) as JavaScript, under the
    policy that lets the page load its own module scripts only."""
    from memory_hub.edge.public import STATIC
    from memory_hub_local.gateway import api_event

    modules = sorted(p.name for p in (STATIC / "console").glob("*.js"))
    assert "app.js" in modules and "api.js" in modules
    function = _function_of(functions)("/{proxy+}")
    for path, kind in [
        ("/console", "text/html"),
        *((f"/console/{name}", "text/javascript") for name in [*modules, "rules.js"]),
    ]:
        resource = "/console" if path == "/console" else "/{proxy+}"
        outcome = functions.invoke(function, api_event("GET", path, {"Accept": "*/*"}, None, resource=resource))
        assert outcome.error is None, outcome.error
        answer = outcome.result
        assert answer["statusCode"] == 200, (path, answer)
        assert answer["headers"]["Content-Type"].startswith(kind), path
        assert "script-src 'self'" in answer["headers"]["Content-Security-Policy"], path
    page = functions.invoke(function, api_event("GET", "/console", {}, None, resource="/console")).result["body"]
    assert '<script type="module" src="console/app.js"></script>' in page


def test_environments_idle_for_the_limit_are_retired_as_lambda_retires_them(functions):
    """A burst leaves environments behind (a process each); once idle for ``idle_retire_s`` they are
    closed, and the next invocation starts a new one (a cold start, as on Lambda)."""
    event = json.loads((EVENTS / "scheduled" / "cleanup.json").read_text())
    functions.warm(["CleanupFunction"], each=2)
    left = functions.idle("CleanupFunction")
    assert len(left) >= 2
    waiting = [e for name in functions.deployment.functions for e in functions.idle(name)]  # every function's
    oldest, newest = min(e.idle_since for e in waiting), max(e.idle_since for e in waiting)
    assert functions.retire_idle(now=oldest + functions.idle_retire_s - 0.001) == 0  # none idle long enough yet
    # a millisecond past the limit: (newest + limit) - newest can round to just under the limit
    assert functions.retire_idle(now=newest + functions.idle_retire_s + 0.001) == len(waiting)
    assert functions.idle("CleanupFunction") == []
    assert all(e.process.wait(timeout=10) is not None for e in left)  # their processes are gone
    outcome = functions.invoke("CleanupFunction", event)
    assert outcome.error is None and outcome.cold


def test_a_pool_retires_idle_environments_by_itself(plain_aws, tmp_path):
    from memory_hub_local.functions import FunctionPool
    from memory_hub_local.template import deploy

    url, secret_arns = plain_aws
    with (tmp_path / "functions.log").open("wb") as log:
        pool = FunctionPool(deploy(REGION, secret_arns), url, "http://127.0.0.1:9", log=log, idle_retire_s=0.2)
        try:
            pool.warm(["CleanupFunction"])
            started = pool.idle("CleanupFunction")
            assert len(started) == 1
            assert started[0].process.wait(timeout=30) is not None  # retired (killed) by the pool's own thread
            assert pool.idle("CleanupFunction") == []
        finally:
            pool.close()
