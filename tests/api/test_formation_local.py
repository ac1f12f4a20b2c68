"""Formation on the local stack, as `make run` serves it: a stack of its own with formation on
against the scripted model (memory_hub_local.scripted_llm) — the emulated Bedrock's Converse held
to each function's IAM policy; the functions get no MEMORY_HUB_LLM_* variable; the control routes
of the AWS port take only the operator's signature; the formation queue's per-message delays and
the event source's MaximumConcurrency run as on AWS; and `make run`'s banner says whether
formation is on."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from helpers import Control, Hooks, denied_calls, launch, local_stack, output_after
from memory_hub_local.scripted_llm import SAVE_MEMORIES, ScriptedServer, serve, stop

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
MODEL = "amazon.nova-lite-v1:0"
HELLO = [{"role": "user", "content": [{"text": "hello"}]}]
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})
START_S = 120


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    server, _ = serve()
    yield server
    stop(server)


@pytest.fixture(scope="module")
def stack(scripted: ScriptedServer) -> Iterator[Any]:
    """A stack with formation on (batch 4, idle 30 s) relaying Converse to the scripted model. Its
    teardown checks that no function call was refused by its policy but the one refusal asked for."""
    running = local_stack("Disabled", llm_url=scripted.url, llm_model="tiny", formation_batch=4, formation_idle_s=30)
    started = next(running)
    try:
        yield started
        asked = [c for c in denied_calls(Hooks(started.aws_url).calls()) if c["function"] != "ScenarioFunction"]
        assert asked == [], asked[:5]
    finally:
        next(running, None)


@pytest.fixture(scope="module")
def hooks(stack: Any) -> Hooks:
    return Hooks(stack.aws_url)


def bedrock(stack: Any, function: str | None = None) -> Any:
    who = stack.credentials.operator if function is None else stack.credentials.function(function)
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=stack.aws_url,
        region_name=REGION,
        aws_access_key_id=who.access_key,
        aws_secret_access_key=who.secret,
        aws_session_token=who.token,
        config=NO_RETRIES,
    )


# ---------------------------------------------------------------- Converse, held to each function's policy


def test_a_function_s_converse_is_held_to_its_iam_policy(stack, scripted, hooks):
    scripted.model.clear_requests()
    since = hooks.last_seq()
    tools = {
        "tools": [{"toolSpec": {"name": SAVE_MEMORIES, "inputSchema": {"json": {"type": "object"}}}}],
        "toolChoice": {"tool": {"name": SAVE_MEMORIES}},
    }
    answer = bedrock(stack, "FormationFunction").converse(modelId=MODEL, messages=HELLO, toolConfig=tools)
    assert answer["stopReason"] == "tool_use"
    assert answer["output"]["message"]["content"][0]["toolUse"]["input"] == {"memories": []}
    with pytest.raises(ClientError) as refused:
        bedrock(stack, "ScenarioFunction").converse(modelId=MODEL, messages=HELLO)
    error = refused.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403 and error["Error"]["Code"] == "AccessDeniedException"
    assert (
        "ScenarioFunction is not authorized to perform: bedrock:InvokeModel on resource: " in error["Error"]["Message"]
    )
    assert [r["model"] for r in scripted.model.requests()] == ["tiny"], "only the allowed call reached the model"
    logged = [(c["function"], c["operation"], c["refused"]) for c in hooks.calls(since) if c["service"] == "bedrock"]
    assert logged == [
        ("FormationFunction", "Converse", None),
        ("ScenarioFunction", "Converse", "AccessDeniedException"),
    ]
    assert next(c["actions"] for c in hooks.calls(since) if c["service"] == "bedrock") == [
        ["bedrock:InvokeModel", f"arn:aws:bedrock:{REGION}::foundation-model/{MODEL}"]
    ]


def test_formation_is_on_for_the_functions_and_the_language_model_is_not_theirs(stack):
    assert stack.deployment.parameters["Formation"] == "Enabled"
    for function in stack.deployment.functions.values():
        environment = stack.pool.environment_of(function)
        assert not [name for name in environment if name.startswith("MEMORY_HUB_LLM")], function.logical_id
        assert (environment["FORMATION"], environment["FORMATION_BATCH"], environment["FORMATION_IDLE_S"]) == (
            "Enabled",
            "4",
            "30",
        )
        assert environment["FORMATION_MODEL"] == MODEL and environment["FORMATION_QUEUE_URL"].endswith("FormationQueue")


# ---------------------------------------------------------------- the control routes: the operator's alone


def test_the_control_routes_take_only_the_operator_s_signature(stack):
    for method, path in (("POST", "/_local/snapshot"), ("GET", "/_local/calls"), ("DELETE", "/_local/hooks")):
        unsigned = requests.request(method, stack.aws_url + path, timeout=30)
        assert unsigned.status_code == 403, (method, path)
        assert unsigned.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
        assert "operator's credentials" in unsigned.json()["message"]
    assert requests.get(f"{stack.aws_url}/_local/health", timeout=30).status_code == 200, "health stays open"
    operator = Control.of(stack)
    assert operator.send("POST", "/_local/snapshot").status == 200  # an ephemeral stack saves nothing
    assert operator.send("GET", "/_local/calls", query={"since": "0"}).body["calls"]
    forged = Control(stack.aws_url, (operator.operator[0], "not-the-secret", REGION))
    refused = forged.send("POST", "/_local/snapshot")
    assert refused.status == 403 and refused.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    own = stack.credentials.function("AdminFunction")  # a function's credentials: its session token signed too
    request = AWSRequest("POST", f"{stack.aws_url}/_local/snapshot", {}, b"")
    SigV4Auth(Credentials(own.access_key, own.secret, own.token), "local", REGION).add_auth(request)
    refused = operator.transport.send("POST", "/_local/snapshot", None, dict(request.headers.items()))
    assert refused.status == 403 and refused.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert "operator's credentials" in refused.body["message"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl here")
def test_curl_signs_a_control_request_as_the_readme_shows(stack):
    environment = stack.aws_environment()
    user = f"{environment['AWS_ACCESS_KEY_ID']}:{environment['AWS_SECRET_ACCESS_KEY']}"
    command = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]
    command += ["--aws-sigv4", f"aws:amz:{REGION}:local", "--user", user, f"{stack.aws_url}/_local/snapshot"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout == "200", done.stderr
    command[command.index("--user") + 1] = f"{environment['AWS_ACCESS_KEY_ID']}:wrong"
    assert subprocess.run(command, capture_output=True, text=True, timeout=60, check=False).stdout == "403"


# ---------------------------------------------------------------- SQS as Lambda runs it


def test_a_delayed_message_is_received_once_its_delay_has_passed(stack):
    """moto honours SendMessage's DelaySeconds (0–900) on a standard queue, as SQS does: the
    formation queue's idle timer. (The dead-letter queue: no event source polls it.)"""
    environment = stack.aws_environment()
    sqs = boto3.client(
        "sqs",
        endpoint_url=stack.aws_url,
        region_name=REGION,
        aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"],
    )
    queue = sqs.get_queue_url(QueueName="FormationDeadLetterQueue")["QueueUrl"]
    sent = time.monotonic()
    sqs.send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=2)
    sqs.send_message(QueueUrl=queue, MessageBody="now")
    first = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in first] == ["now"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    later: list[dict[str, Any]] = []
    while not later and time.monotonic() - sent < 10:
        later = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        time.sleep(0.1)
    assert [m["Body"] for m in later] == ["later"] and time.monotonic() - sent >= 2
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=queue, MessageBody="x", DelaySeconds=901)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    for message in first + later:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])


class _Queue:
    """A fake SQS client: ``total`` messages, received up to the batch size a call."""

    def __init__(self, total: int) -> None:
        self.left = [{"MessageId": str(i), "ReceiptHandle": f"r{i}", "Body": "{}"} for i in range(total)]
        self.sent = total
        self.deleted: list[str] = []
        self.lock = threading.Lock()

    def receive_message(self, MaxNumberOfMessages: int, **_: Any) -> dict[str, Any]:  # noqa: N803 - botocore's names
        with self.lock:
            got, self.left = self.left[:MaxNumberOfMessages], self.left[MaxNumberOfMessages:]
        return {"Messages": got}

    def delete_message_batch(self, Entries: list[dict[str, str]], **_: Any) -> None:  # noqa: N803
        assert len(Entries) <= 10, "SQS takes at most 10 entries a DeleteMessageBatch"
        with self.lock:
            self.deleted += [e["ReceiptHandle"] for e in Entries]

    def send(self, total: int) -> None:
        with self.lock:
            start, self.sent = self.sent, self.sent + total
            self.left += [
                {"MessageId": str(i), "ReceiptHandle": f"r{i}", "Body": "{}"} for i in range(start, start + total)
            ]


class _Pool:
    """A fake function pool: each invocation takes a moment; how many ran at once is counted."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        from memory_hub_local.functions import Invocation

        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.batches.append(len(event["Records"]))
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return Invocation(result={"batchItemFailures": []})


@pytest.mark.parametrize(("concurrency", "batch"), [(1, 10), (3, 1)])
def test_an_event_source_runs_up_to_its_maximum_concurrency_at_once(concurrency, batch):
    from memory_hub_local import event_sources
    from memory_hub_local.identity import Credentials

    source = event_sources.Source("F", "https://q", "arn:aws:sqs:us-east-1:123456789012:q", batch, True, concurrency)
    pool, queue = _Pool(), _Queue(12)
    poller = event_sources.Poller(source, pool, "http://127.0.0.1:9", REGION, Credentials(bytes(32)))  # type: ignore[arg-type]
    poller.client = queue
    poller.start()
    try:
        deadline = time.monotonic() + 30
        while len(queue.deleted) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        poller.stop()
    assert sorted(queue.deleted) == sorted(f"r{i}" for i in range(12))
    assert pool.most == concurrency and poller.most == concurrency
    assert max(pool.batches) == batch and sum(pool.batches) == 12


def test_a_batching_window_gathers_messages_sent_while_it_is_open_into_one_invocation():
    """As Lambda's MaximumBatchingWindowInSeconds: messages that arrive within the window after the
    first join its batch (past SQS's 10 a receive), up to BatchSize; later ones make the next."""
    from memory_hub_local import event_sources
    from memory_hub_local.identity import Credentials

    source = event_sources.Source("F", "https://q", "arn:aws:sqs:us-east-1:123456789012:q", 100, True, 1, 3.0)
    pool, queue = _Pool(), _Queue(5)
    poller = event_sources.Poller(source, pool, "http://127.0.0.1:9", REGION, Credentials(bytes(32)))  # type: ignore[arg-type]
    poller.client = queue
    poller.start()
    try:
        time.sleep(1.0)
        queue.send(20)  # within the window: the same batch
        deadline = time.monotonic() + 30
        while len(queue.deleted) < 25 and time.monotonic() < deadline:
            time.sleep(0.05)
        queue.send(3)  # after it closed: a batch of their own
        while len(queue.deleted) < 28 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        poller.stop()
    assert pool.batches == [25, 3]
    assert sorted(queue.deleted) == sorted(f"r{i}" for i in range(28))


def test_the_template_s_formation_source_is_batch_1_at_concurrency_10(stack):
    from memory_hub_local import event_sources

    found = {(s.function, s.queue_url.rsplit("/", 1)[1]): s for s in event_sources.sources(stack.deployment)}
    formation, embed = found["FormationFunction", "FormationQueue"], found["EmbedFunction", "EmbedQueue"]
    assert (formation.batch_size, formation.concurrency) == (1, 10)
    assert formation.partial and embed.concurrency == 5
    # VectorWrites Immediate (the default): the embedding queue only carries retries, a 1 s window;
    # no drain, so VectorQueue's own event source is on (it takes what a drain would)
    assert (embed.batch_size, embed.window_s) == (10, 1.0)
    assert ("EmbedFunction", "VectorQueue") in found


# ---------------------------------------------------------------- `make run`'s banner


def ports() -> list[str]:
    from memory_hub_local.stack import held_port

    return ["--port", str(held_port()), "--lambda-port", str(held_port()), "--aws-port", str(held_port())]


def local(*extra: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "memory-hub"), "local", "--ephemeral", *ports(), *extra]


def stopped(process: subprocess.Popen[str]) -> str:
    os.killpg(process.pid, signal.SIGTERM)
    out = output_after(process, 120)
    return out


def test_without_a_language_model_the_banner_says_formation_is_off():
    process, lines = launch(local(), ROOT, START_S)
    try:
        banner = "".join(lines)
        assert (
            "  formation    off (set MEMORY_HUB_LLM_URL to an OpenAI-compatible server to form memory)\n" in banner
        ), banner
    finally:
        stopped(process)


def test_with_a_language_model_the_banner_says_formation_is_on_and_converse_reaches_it(scripted):
    process, lines = launch(
        local(),
        ROOT,
        START_S,
        MEMORY_HUB_LLM_URL=scripted.url,
        MEMORY_HUB_LLM_MODEL="tiny",
        MEMORY_HUB_FORMATION_BATCH="3",
    )
    try:
        banner = "".join(lines)
        assert f"  formation    on (model {MODEL} relayed to {scripted.url} as tiny)\n" in banner, banner
        exported = dict(re.findall(r"export (AWS_[A-Z_]+)=(\S+)", banner))
        operator = boto3.client(
            "bedrock-runtime",
            endpoint_url=exported["AWS_ENDPOINT_URL"],
            region_name=exported["AWS_DEFAULT_REGION"],
            aws_access_key_id=exported["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exported["AWS_SECRET_ACCESS_KEY"],
            config=NO_RETRIES,
        )
        scripted.model.clear_requests()
        assert operator.converse(modelId=MODEL, messages=HELLO)["output"]["message"]["content"] == [{"text": "OK."}]
        assert [r["model"] for r in scripted.model.requests()] == ["tiny"]
    finally:
        stopped(process)


def test_a_formation_parameter_out_of_its_range_is_one_clear_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMORY_HUB_"))}
    done = subprocess.run(
        local(),
        cwd=ROOT,
        env={**env, "MEMORY_HUB_FORMATION_BATCH": "1"},
        capture_output=True,
        text=True,
        timeout=START_S,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "cannot start: FormationBatch must be at least 2 (not 1)" in done.stderr
