"""The local stack over real HTTP: API, Lambda Invoke API, emulated AWS endpoint, OpenAPI drift."""

from __future__ import annotations

import gzip
import json
import re
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
import requests
from helpers import ADMIN_KEY, SERVICE_ID, eventually, make_scope

ROOT = Path(__file__).resolve().parents[2]
REQUEST_ID = re.compile(r"^req-[0-9a-f]{16}$")
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}", "x-tdai-service-id": SERVICE_ID}


@pytest.fixture(scope="module")
def urls(stack):
    return stack.api_url, stack.lambda_url, stack.aws_url


@pytest.fixture(scope="module")
def http():
    with requests.Session() as session:
        yield session


def post(http, base, path, body, headers=None, **kw):
    return http.post(base + path, data=json.dumps(body).encode(), headers={**AUTH, **(headers or {})}, timeout=30, **kw)


def test_health(urls, http):
    answer = http.get(urls[0] + "/health", timeout=10)
    assert answer.status_code == 200 and answer.json() == {"status": "ok", "formation": "off"}
    assert answer.headers["Content-Type"].startswith("application/json")


def test_openapi_describes_every_implemented_route(urls, http):
    from memory_hub.edge.routes import ROUTES

    answer = http.get(urls[0] + "/openapi.json", timeout=10)
    assert answer.status_code == 200
    spec = answer.json()
    assert spec["openapi"].startswith("3.") and spec["info"]["title"]
    implemented = [path for path in ROUTES if post(http, urls[0], path, {}).status_code != 404]
    # the routes this suite exercises must be among them, so the check below is never vacuous
    assert {
        "/v3/scenario/write",
        "/v3/scenario/ls",
        "/v3/core/write",
        "/v3/admin/keys/create",
        "/v3/audit/query",
    } <= set(implemented)
    missing = [path for path in implemented if "post" not in spec["paths"].get(path, {})]
    assert missing == []
    write = spec["paths"]["/v3/scenario/write"]["post"]
    assert "requestBody" in write


def test_docs_page(urls, http):
    answer = http.get(urls[0] + "/docs", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/html")
    assert "swagger" in answer.text.lower() and "<html" in answer.text.lower()


def test_404_and_405_are_envelopes(urls, http):
    missing = post(http, urls[0], "/v3/nothing/here", {})
    assert missing.status_code == 404
    body = missing.json()
    assert body["code"] == 404 and REQUEST_ID.match(body["request_id"])
    assert missing.headers["x-request-id"] == body["request_id"]
    wrong = http.get(urls[0] + "/v3/scenario/read", headers=AUTH, timeout=10)
    assert wrong.status_code == 405 and wrong.json()["code"] == 405
    anonymous = http.post(urls[0] + "/v3/nothing/here", data=b"{}", timeout=10)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == 401


def test_head_answers_without_a_body_and_keeps_the_connection_usable(urls):
    with requests.Session() as session:
        for _ in range(3):
            head = session.head(urls[0] + "/v3/scenario/read", headers=AUTH, timeout=10)
            assert head.status_code == 405 and head.content == b""
            assert session.get(urls[0] + "/health", timeout=10).json() == {"status": "ok", "formation": "off"}


def test_write_and_read_over_http_with_gzip(urls, http):
    scope = make_scope()
    raw = gzip.compress(json.dumps(scope.body(path="g/a.md", content="über gzip ✓")).encode())
    written = http.post(
        urls[0] + "/v3/scenario/write",
        data=raw,
        timeout=30,
        headers={**AUTH, "Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert written.status_code == 200, written.text
    assert written.json()["data"]["version"] == 1
    read = post(http, urls[0], "/v3/scenario/read", scope.body(path="g/a.md"))
    assert read.json()["data"]["content"].endswith("\n\nüber gzip ✓")


def test_chunked_request_body(urls, http):
    scope = make_scope()
    raw = json.dumps(scope.body(path="chunked.md", content="in pieces")).encode()
    pieces = iter([raw[:7], raw[7:30], raw[30:]])  # a generator body is sent with Transfer-Encoding: chunked
    answer = http.post(urls[0] + "/v3/scenario/write", data=pieces, headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    read = post(http, urls[0], "/v3/scenario/read", scope.body(path="chunked.md"))
    assert read.json()["data"]["content"].endswith("\n\nin pieces")


def test_too_large_body_is_answered_413_without_a_reset(urls, http):
    scope = make_scope()
    body = json.dumps(scope.body(path="big.md", content="x" * (1_572_864 - 200))).encode()
    answer = http.post(urls[0] + "/v3/scenario/write", data=body, headers=AUTH, timeout=30)
    assert answer.status_code == 413
    assert answer.json()["code"] == 413
    # the connection stays usable: the body was read, not cut off
    assert http.get(urls[0] + "/health", timeout=10).status_code == 200
    assert post(http, urls[0], "/v3/scenario/read", scope.body(path="big.md")).json()["data"]["content"] is None


def test_sixteen_mixed_requests_at_once_all_succeed(urls):
    scope = make_scope()

    def one(i):
        with requests.Session() as session:
            if i % 2:
                answer = post(session, urls[0], "/v3/scenario/write", scope.body(path=f"c/{i}.md", content=str(i)))
            else:
                answer = post(session, urls[0], "/v3/scenario/read", scope.body(path=f"c/{i + 1}.md"))
            return answer.status_code, answer.json()

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(32)))
    assert all(status == 200 and body["code"] == 0 for status, body in results), results
    listing = post(requests, urls[0], "/v3/scenario/ls", scope.body()).json()["data"]
    assert listing["total"] == 16


def test_slow_requests_do_not_block_others(urls):
    """Eight requests whose bodies are still arriving hold eight server threads; a ninth is served."""
    scope = make_scope()
    host, port = urlsplit(urls[0]).hostname, urlsplit(urls[0]).port
    body = json.dumps(scope.body(path="slow.md", content="held")).encode()
    head = (
        f"POST /v3/scenario/write HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        f"x-tdai-service-id: {SERVICE_ID}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    held = []
    try:
        for _ in range(8):
            sock = socket.create_connection((host, port), timeout=10)
            sock.sendall(head + body[:5])
            held.append(sock)
        assert requests.get(urls[0] + "/health", timeout=10).json() == {"status": "ok", "formation": "off"}
        for sock in held:
            sock.sendall(body[5:])
        replies = []
        for sock in held:
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            replies.append(b"".join(chunks))
    finally:
        for sock in held:
            sock.close()
    statuses = [int(reply.split(b" ", 2)[1]) for reply in replies]
    assert statuses == [200] * 8
    versions = sorted(json.loads(reply.split(b"\r\n\r\n", 1)[1])["data"]["version"] for reply in replies)
    assert versions == list(range(1, 9))


def test_lambda_invoke_api_runs_a_function(urls):
    from memory_hub_local.gateway import api_event

    client = boto3.client("lambda", endpoint_url=urls[1], region_name="us-east-1")
    result = client.invoke(FunctionName="AdminFunction", Payload=json.dumps(api_event("GET", "/health", {}, None)))
    assert result["StatusCode"] == 200 and "FunctionError" not in result
    payload = json.loads(result["Payload"].read())
    assert payload["statusCode"] == 200 and json.loads(payload["body"]) == {"status": "ok", "formation": "off"}


def test_lambda_invoke_api_works_against_the_running_stack(urls, http):
    from memory_hub_local.gateway import api_event

    scope = make_scope()
    event = api_event(
        "POST", "/v3/scenario/write", AUTH, json.dumps(scope.body(path="inv.md", content="invoked")).encode()
    )
    client = boto3.client("lambda", endpoint_url=urls[1], region_name="us-east-1")
    payload = json.loads(client.invoke(FunctionName="ScenarioFunction", Payload=json.dumps(event))["Payload"].read())
    assert payload["statusCode"] == 200, payload
    read = post(http, urls[0], "/v3/scenario/read", scope.body(path="inv.md")).json()["data"]
    assert read["content"].endswith("\n\ninvoked")
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.invoke(FunctionName="NoSuchFunction", Payload=b"{}")


def test_an_asynchronous_invocation_finishes_a_handed_on_purge(urls, http, function_env, hooks):
    """A clear that runs out of time hands its purge on with InvocationType=Event; the
    local Invoke API accepts it (202) and runs it in the background to purge_complete."""

    scope = make_scope()
    assert post(http, urls[0], "/v3/scenario/write", scope.body(path="a.md", content="x")).status_code == 200
    function_env("ClearFunction", MEMORY_HUB_CLEAR_BUDGET_S="0")  # as if the memory were too large to finish
    since = hooks.last_seq()
    answer = post(http, urls[0], "/v3/chat-memory/clear", {"memory_ids": [scope.memory_id]}).json()
    assert answer["data"]["items"][0]["purge_pending"] is True, answer

    def completed() -> bool:
        events = post(http, urls[0], "/v3/audit/query", {"memory_id": scope.memory_id}).json()["data"]["events"]
        return any(e["target"] == "purge_complete" for e in events)

    eventually(completed, "the asynchronous purge did not complete", timeout=30, every=0.05)
    listed = boto3.client("s3", endpoint_url=urls[2], region_name="us-east-1").list_objects_v2(
        Bucket="memory-hub-local", Prefix=f"profiles/{scope.team_id}:{scope.agent_id}/"
    )
    assert listed.get("KeyCount", 0) == 0
    # the continuation ran as ClearFunction itself, through the Invoke API (asynchronously)
    reads_by_clear = [c for c in hooks.calls(since) if c["function"] == "ClearFunction"]
    assert reads_by_clear


def test_aws_endpoint_shows_the_bucket_and_plain_text_files(urls, http):
    scope = make_scope()
    post(http, urls[0], "/v3/scenario/write", scope.body(path="aws/é.md", content="plain ✓ text"))
    content = post(http, urls[0], "/v3/scenario/read", scope.body(path="aws/é.md")).json()["data"]["content"]
    s3 = boto3.client("s3", endpoint_url=urls[2], region_name="us-east-1")
    key = f"profiles/{scope.team_id}:{scope.agent_id}/{scope.memory_id}/scene_blocks/aws/é.md"
    listed = s3.list_objects_v2(Bucket="memory-hub-local", Prefix=f"profiles/{scope.team_id}:")
    assert [o["Key"] for o in listed["Contents"]] == [key]
    assert "memory-hub-local" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    obj = s3.get_object(Bucket="memory-hub-local", Key=key)
    assert obj.get("ContentEncoding") in (None, "", "identity")
    assert obj["Body"].read().decode("utf-8") == content
    dynamodb = boto3.client("dynamodb", endpoint_url=urls[2], region_name="us-east-1")
    assert "KeysTable" in dynamodb.list_tables()["TableNames"]


def test_shipped_openapi_matches_the_code():
    result = subprocess.run(
        [str(ROOT / ".venv/bin/memory-hub"), "openapi", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_the_emulated_aws_process_keeps_two_malloc_arenas(stack):
    """It answers each request on a thread of its own; glibc would give each thread a heap of its own
    that keeps what was freed in it (half of a grown account's resident memory)."""
    assert stack._aws is not None
    environment = Path(f"/proc/{stack._aws.pid}/environ").read_bytes().split(b"\0")
    assert b"MALLOC_ARENA_MAX=2" in environment
