"""The local stack's ports are as strict as AWS where a local process or a web page could reach in:
the emulated AWS endpoint answers only signed requests (signatures verified, presigned URLs
included) for a loopback Host; the Lambda Invoke API only a local program's JSON; and API Gateway
answers its own refusals (an unknown asset, headers too large, an encoded slash) as envelopes."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from helpers import ADMIN_KEY, BUCKET, SERVICE_ID, make_scope, ok

REGION = "us-east-1"
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}", "x-tdai-service-id": SERVICE_ID}


def client(stack, service: str, key: str | None = None, secret: str | None = None, token: str | None = None):
    operator = stack.credentials.operator
    return boto3.client(
        service,
        endpoint_url=stack.aws_url,
        region_name=REGION,
        aws_access_key_id=key or operator.access_key,
        aws_secret_access_key=secret or operator.secret,
        aws_session_token=token,
        config=Config(signature_version="s3v4" if service == "s3" else None),
    )


def error_of(call) -> tuple[int, str]:
    with pytest.raises(ClientError) as raised:
        call()
    return raised.value.response["ResponseMetadata"]["HTTPStatusCode"], raised.value.response["Error"]["Code"]


def signed(
    stack,
    method: str,
    url: str,
    service: str,
    headers: dict[str, str],
    body: bytes = b"",
    when: datetime | None = None,
    region: str = REGION,
) -> requests.Response:
    """A request signed (SigV4, in the header) with the operator's key for ``url``, sent to the stack."""
    operator = stack.credentials.operator
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    request = AWSRequest(method=method, url=url, headers={**headers, "X-Amz-Date": stamp}, data=body)
    if service == "s3":
        request.headers["X-Amz-Content-SHA256"] = (
            headers.get("X-Amz-Content-SHA256") or hashlib.sha256(body).hexdigest()
        )
    signer = SigV4Auth(Credentials(operator.access_key, operator.secret), service, region)
    request.context["timestamp"] = stamp
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    names = signer.signed_headers(signer.headers_to_sign(request))
    request.headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={operator.access_key}/{stamp[:8]}/{region}/{service}/aws4_request, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    host = url.split("/")[2]
    target = stack.aws_url + "/" + url.split("/", 3)[3] if url.count("/") >= 3 else stack.aws_url
    return requests.request(
        method, target, headers={**dict(request.headers), "Host": host}, data=body or None, timeout=30
    )


# ---------------------------------------------------------------- the emulated AWS endpoint


def test_unsigned_requests_get_what_each_service_answers_on_aws(stack):
    anonymous = requests.get(f"{stack.aws_url}/{BUCKET}?list-type=2", timeout=30)
    assert anonymous.status_code == 403 and "<Code>AccessDenied</Code>" in anonymous.text
    for target, content_type in (
        ("DynamoDB_20120810.Scan", "application/x-amz-json-1.0"),
        ("secretsmanager.GetSecretValue", "application/x-amz-json-1.1"),
    ):
        body = json.dumps({"TableName": "KeysTable", "SecretId": "BootstrapAdminKeySecret"})
        answer = requests.post(
            stack.aws_url + "/", data=body, headers={"X-Amz-Target": target, "Content-Type": content_type}, timeout=30
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["__type"].endswith("#MissingAuthenticationTokenException")
        assert ADMIN_KEY not in answer.text


def test_an_unknown_key_or_a_wrong_secret_is_refused_as_aws_refuses_it(stack):
    operator = stack.credentials.operator
    stranger = {"key": "AKIAIOSFODNN7EXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    forger = {"key": operator.access_key, "secret": "not-the-secret"}
    assert error_of(lambda: client(stack, "s3", **stranger).list_objects_v2(Bucket=BUCKET)) == (
        403,
        "InvalidAccessKeyId",
    )
    assert error_of(lambda: client(stack, "s3", **forger).list_objects_v2(Bucket=BUCKET)) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert error_of(lambda: client(stack, "dynamodb", **stranger).list_tables()) == (
        400,
        "UnrecognizedClientException",
    )
    assert error_of(lambda: client(stack, "dynamodb", **forger).list_tables()) == (400, "InvalidSignatureException")
    secrets = client(stack, "secretsmanager", **forger)
    assert error_of(lambda: secrets.get_secret_value(SecretId="BootstrapAdminKeySecret")) == (
        400,
        "InvalidSignatureException",
    )


def test_the_printed_credentials_open_the_account(stack):
    assert "KeysTable" in client(stack, "dynamodb").list_tables()["TableNames"]
    s3 = client(stack, "s3")
    s3.put_object(Bucket=BUCKET, Key="surfaces/a b:c.md", Body="plain ✓".encode())
    assert s3.get_object(Bucket=BUCKET, Key="surfaces/a b:c.md")["Body"].read().decode() == "plain ✓"
    names = [s["Name"] for s in client(stack, "secretsmanager").list_secrets()["SecretList"]]
    assert "BootstrapAdminKeySecret" in names


@pytest.mark.skipif(shutil.which("aws") is None, reason="the AWS CLI is not installed")
def test_the_aws_cli_lines_of_the_readme_work_with_the_printed_credentials(stack):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | stack.aws_environment()
    listed = subprocess.run(
        ["aws", "s3", "ls", "--endpoint-url", stack.aws_url], env=env, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0 and BUCKET in listed.stdout, listed.stderr
    tables = subprocess.run(["aws", "dynamodb", "list-tables"], env=env, capture_output=True, text=True, timeout=120)
    assert tables.returncode == 0 and "KeysTable" in tables.stdout, tables.stderr


def test_a_functions_key_needs_its_own_secret_and_session_token(stack):
    own = stack.credentials.function("ScenarioFunction")
    assert error_of(
        lambda: client(stack, "dynamodb", own.access_key, own.secret).describe_table(TableName="ScenesTable")
    ) == (400, "UnrecognizedClientException")
    assert error_of(
        lambda: client(stack, "s3", own.access_key, own.secret, "local-session-guess").list_objects_v2(Bucket=BUCKET)
    ) == (400, "InvalidToken")
    with_token = client(stack, "dynamodb", own.access_key, own.secret, own.token)
    assert with_token.describe_table(TableName="ScenesTable")["Table"]["TableName"] == "ScenesTable"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.2", "[::1]"])
def test_a_loopback_host_is_served(stack, host):
    port = stack.aws_url.rsplit(":", 1)[1]
    answer = signed(stack, "GET", f"http://{host}:{port}/{BUCKET}?list-type=2", "s3", {})
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("host", ["rebound.example", "127.0.0.1.nip.io", "10.0.0.1", "localhost.evil.example"])
def test_a_foreign_host_is_refused_even_when_signed(stack, host):
    """A web page that rebinds its own name to 127.0.0.1 sends its own name as the Host."""
    port = stack.aws_url.rsplit(":", 1)[1]
    name = f"{host}:{port}"
    answer = signed(stack, "GET", f"http://{name}/{BUCKET}?list-type=2", "s3", {})
    assert answer.status_code == 403 and "<Code>AccessDenied</Code>" in answer.text
    body = json.dumps({"SecretId": "BootstrapAdminKeySecret"}).encode()
    headers = {"X-Amz-Target": "secretsmanager.GetSecretValue", "Content-Type": "application/x-amz-json-1.1"}
    answer = signed(stack, "POST", f"http://{name}/", "secretsmanager", headers, body)
    assert answer.status_code == 403 and ADMIN_KEY not in answer.text
    control = requests.get(f"{stack.aws_url}/_local/health", headers={"Host": name}, timeout=30)
    assert control.status_code == 403


def test_the_control_routes_refuse_a_web_pages_request(stack):
    assert requests.get(f"{stack.aws_url}/_local/health", timeout=30).status_code == 200
    page = requests.post(f"{stack.aws_url}/_local/snapshot", headers={"Origin": "http://evil.example"}, timeout=30)
    assert page.status_code == 403


def test_a_header_signature_more_than_15_minutes_off_is_refused(stack):
    port = stack.aws_url.rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{port}/{BUCKET}?list-type=2"
    for off in (timedelta(minutes=-16), timedelta(minutes=16)):
        answer = signed(stack, "GET", url, "s3", {}, when=datetime.now(UTC) + off)
        assert answer.status_code == 403 and "<Code>RequestTimeTooSkewed</Code>" in answer.text
    assert signed(stack, "GET", url, "s3", {}, when=datetime.now(UTC) - timedelta(minutes=10)).status_code == 200
    headers = {"X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0"}
    old = signed(
        stack,
        "POST",
        f"http://127.0.0.1:{port}/",
        "dynamodb",
        headers,
        b"{}",
        datetime.now(UTC) - timedelta(minutes=16),
    )
    assert old.status_code == 400 and old.json()["__type"].endswith("#InvalidSignatureException")
    assert "Signature expired" in old.json()["message"]


def test_an_s3_body_must_be_the_one_signed(stack):
    port = stack.aws_url.rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{port}/{BUCKET}/surfaces/sha.md"
    claimed = hashlib.sha256(b"what was signed").hexdigest()
    answer = signed(stack, "PUT", url, "s3", {"X-Amz-Content-SHA256": claimed}, b"what was sent")
    assert answer.status_code == 400 and "<Code>XAmzContentSHA256Mismatch</Code>" in answer.text
    assert signed(stack, "PUT", url, "s3", {}, b"what was sent").status_code == 200


# ---------------------------------------------------------------- presigned URLs


def test_a_presigned_upload_url_opens_its_own_object_only(stack, api):
    """The import's upload URL, its path changed to another team's persona: refused, nothing written."""
    victim, intruder = make_scope(), make_scope()
    written = api.post("/v3/core/write", victim.body(content="the victim's persona"))
    assert written.status == 200, written.body
    persona = f"profiles/{victim.team_id}:{victim.agent_id}/{victim.memory_id}/"
    s3 = client(stack, "s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=persona).get("Contents", [])]
    target = next(k for k in keys if k.endswith("persona.md"))
    before = s3.get_object(Bucket=BUCKET, Key=target)["Body"].read()
    created = api.post("/v3/memory/import", {"team_id": intruder.team_id, "agent_id": intruder.agent_id})
    assert created.status == 200, created.body
    url, headers = created.data["upload_url"], created.data.get("headers") or {}
    path = url.split("?", 1)[0].split("/", 3)[3]
    moved = url.replace(path, f"{BUCKET}/{quote(target, safe='/~')}")
    answer = requests.put(moved, data=b"overwritten", headers=headers, timeout=30)
    assert answer.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in answer.text
    assert s3.get_object(Bucket=BUCKET, Key=target)["Body"].read() == before
    as_get = requests.get(url, timeout=30)  # another method than the one signed
    assert as_get.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in as_get.text
    assert requests.put(url, data=b"\x1f\x8b", headers=headers, timeout=30).status_code == 200


def test_a_presigned_url_by_another_key_or_expired_is_refused(stack):
    s3 = client(stack, "s3")
    s3.put_object(Bucket=BUCKET, Key="surfaces/p.md", Body=b"p")
    forged = client(stack, "s3", stack.credentials.operator.access_key, "not-the-secret")
    bad = forged.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "surfaces/p.md"}, ExpiresIn=60)
    answer = requests.get(bad, timeout=30)
    assert answer.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in answer.text
    stranger = client(stack, "s3", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    unknown = stranger.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "surfaces/p.md"})
    assert "<Code>InvalidAccessKeyId</Code>" in requests.get(unknown, timeout=30).text
    good = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "surfaces/p.md"}, ExpiresIn=600)
    assert requests.get(good, timeout=30).content == b"p"
    short = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "surfaces/p.md"}, ExpiresIn=1)
    time.sleep(2.1)  # past its expiry (a state, not a measured duration)
    expired = requests.get(short, timeout=30)
    assert expired.status_code == 403 and "<Code>AccessDenied</Code>" in expired.text
    assert "Request has expired" in expired.text


# ---------------------------------------------------------------- the Lambda Invoke API


def invoke(stack, body: bytes | None, **headers: str) -> requests.Response:
    return requests.post(
        f"{stack.lambda_url}/2015-03-31/functions/AdminFunction/invocations", data=body, headers=headers, timeout=60
    )


def test_the_invoke_api_runs_a_local_programs_json(stack):
    from memory_hub_local.gateway import api_event

    answer = invoke(stack, json.dumps(api_event("GET", "/health", {}, None)).encode())
    assert answer.status_code == 200 and answer.json()["statusCode"] == 200
    assert invoke(stack, None).status_code == 200  # no body: an empty event
    for content_type in ("application/json", "application/octet-stream", "binary/octet-stream"):
        assert invoke(stack, b"{}", **{"Content-Type": content_type}).status_code == 200  # SDKs send these


def test_the_invoke_api_dry_run_runs_nothing_and_other_invocation_types_are_refused(stack, api):
    from memory_hub_local.gateway import api_event

    scope = make_scope()
    write = api_event(
        "POST",
        "/v3/scenario/write",
        AUTH,
        json.dumps(scope.body(path="dry.md", content="written once")).encode(),
    )
    lam = boto3.client(
        "lambda", endpoint_url=stack.lambda_url, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    dry = lam.invoke(FunctionName="ScenarioFunction", InvocationType="DryRun", Payload=json.dumps(write).encode())
    assert dry["StatusCode"] == 204 and dry["Payload"].read() == b""
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == 0  # nothing ran
    done = lam.invoke(FunctionName="ScenarioFunction", Payload=json.dumps(write).encode())  # the same event, run
    assert done["StatusCode"] == 200 and json.loads(done["Payload"].read())["statusCode"] == 200
    assert ok(api.post("/v3/scenario/count", scope.body()))["total"] == 1
    for invocation in ("Bogus", "event", ""):
        answer = invoke(stack, b"{}", **{"X-Amz-Invocation-Type": invocation} if invocation else {})
        if invocation:  # Lambda's values are case-sensitive; none is RequestResponse
            assert answer.status_code == 400 and answer.headers["x-amzn-ErrorType"] == "ValidationException"
        else:
            assert answer.status_code == 200


def test_the_invoke_api_processes_nothing_after_a_broken_framing(stack):
    second = (
        b"POST /2015-03-31/functions/AdminFunction/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    for framing in (b"Content-Length: abc\r\n", b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"):
        first = b"POST /2015-03-31/functions/AdminFunction/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n" + framing
        with socket.create_connection(("127.0.0.1", int(stack.lambda_url.rsplit(":", 1)[1])), timeout=30) as sock:
            sock.sendall(first + b"\r\n" + second)
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in reply, reply[:200]
        assert reply.count(b"HTTP/1.1 ") == 1  # the smuggled second request was never run


def test_the_invoke_api_refuses_a_payload_over_6_mb_as_lambda_does(stack):
    answer = invoke(stack, b'{"a": "' + b"x" * (6 * 1024 * 1024) + b'"}')
    assert answer.status_code == 413 and answer.headers["x-amzn-ErrorType"] == "RequestTooLargeException"
    assert answer.json()["message"] == "Request must be smaller than 6291456 bytes for the InvokeFunction operation"


@pytest.mark.parametrize(
    "headers,body",
    [
        ({"Host": "rebound.example"}, b"{}"),
        ({"Origin": "http://evil.example"}, b"{}"),
        ({"Origin": "null"}, b"{}"),
        ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, b'{"path": "/health"}'),
        ({"Content-Type": "application/x-www-form-urlencoded"}, b"a=b"),
        ({"Content-Type": "multipart/form-data; boundary=x"}, b"--x--"),
        ({}, b"not json"),
        ({}, b'{"a": NaN}'),  # Python's parser takes it; JSON has no NaN
    ],
)
def test_the_invoke_api_refuses_what_a_web_page_can_send(stack, headers, body):
    answer = invoke(stack, body, **headers)
    assert answer.status_code == 403
    assert answer.headers["Content-Type"] == "application/json" and answer.json()["message"]


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_the_invoke_api_takes_a_json_body_whatever_its_content_type(stack, content_type):
    """As `sam local start-lambda` does (``curl -d '{}'`` sends a form's type): the body is JSON,
    no Origin came with it (a browser sends one with every cross-origin POST)."""
    headers = {"Content-Type": content_type} if content_type else {}
    answer = invoke(stack, b"{}", **headers)
    assert answer.status_code == 200, answer.text


# ---------------------------------------------------------------- API Gateway


def assert_envelope(answer: requests.Response, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    body = answer.json()
    assert body["code"] == status and body["request_id"] == answer.headers["x-request-id"]


@pytest.mark.parametrize("path", ["/console/nope.js", "/docs/nope.css", "/console/a/b/c.png"])
def test_an_unknown_asset_is_404(stack, path):
    assert_envelope(requests.get(stack.api_url + path, timeout=30), 404)


def test_headers_too_large_are_an_envelope_not_html(stack):
    host, port = stack.api_url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    envelope = json.loads(body)
    assert envelope["code"] == 431 and f"x-request-id: {envelope['request_id']}".encode() in head
    answer = requests.get(stack.api_url + "/health", headers={"X-Big": "a" * 200_000}, timeout=30)
    assert_envelope(answer, 431)
    many = {f"X-H{i}": "v" for i in range(120)}
    assert_envelope(requests.get(stack.api_url + "/health", headers=many, timeout=30), 431)


@pytest.mark.parametrize("path", ["/v3/conversation%2Fquery", "/v3/conversation%2fquery", "/v3%2Fconversation/query"])
def test_an_encoded_slash_is_not_a_separator(stack, path):
    scope = make_scope()
    answer = requests.post(stack.api_url + path, data=json.dumps(scope.body()), headers=AUTH, timeout=30)
    assert_envelope(answer, 404)
    plain = requests.post(
        stack.api_url + "/v3/conversation/query", data=json.dumps(scope.body()), headers=AUTH, timeout=30
    )
    assert plain.status_code == 200, plain.text


def test_bedrock_and_s3_vectors_refuse_as_rest_json_services_do(stack):
    """Bedrock and S3 Vectors (REST JSON protocols) answer 403 with the same codes as the others."""
    for path in ("/model/amazon.titan-embed-text-v2%3A0/invoke", "/ListVectorBuckets", "/QueryVectors"):
        unsigned = requests.post(f"{stack.aws_url}{path}", data=b'{"inputText": "x"}', timeout=30)
        assert unsigned.status_code == 403 and ADMIN_KEY not in unsigned.text
        assert unsigned.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException", path
        assert unsigned.json()["message"]  # JSON, not S3's XML
    # S3's requests stay S3's: a GET of a key named like a model's invoke, POSTs to a bucket
    for method, path in (("GET", "/model/x/invoke"), ("POST", f"/{BUCKET}"), ("POST", f"/{BUCKET}/k?uploads")):
        answer = requests.request(method, f"{stack.aws_url}{path}", timeout=30)
        assert answer.status_code == 403 and "<Code>AccessDenied</Code>" in answer.text, (method, path)


def test_s3_vectors_refuses_a_body_that_is_not_utf8(stack):
    answer = signed(stack, "POST", f"{stack.aws_url}/PutVectors", "s3vectors", {}, b'\xff\xfe{"vectors": []}')
    assert answer.status_code == 400 and answer.headers["x-amzn-ErrorType"] == "ValidationException"
    assert answer.json()["message"] == "The request body is not UTF-8"
    forger = {"key": stack.credentials.operator.access_key, "secret": "not-the-secret"}
    bedrock = client(stack, "bedrock-runtime", **forger)
    invoke = lambda: bedrock.invoke_model(modelId="amazon.titan-embed-text-v2:0", body=b'{"inputText": "x"}')  # noqa: E731
    assert error_of(invoke) == (403, "InvalidSignatureException")
    assert error_of(lambda: client(stack, "s3vectors", **forger).list_vector_buckets()) == (
        403,
        "InvalidSignatureException",
    )
    assert "vectorBuckets" in client(stack, "s3vectors").list_vector_buckets()


def test_a_credential_scoped_to_another_region_is_refused_in_each_services_words(stack):
    def elsewhere(service: str):
        operator = stack.credentials.operator
        return boto3.client(
            service,
            endpoint_url=stack.aws_url,
            region_name="eu-west-1",
            aws_access_key_id=operator.access_key,
            aws_secret_access_key=operator.secret,
            config=Config(signature_version="s3v4" if service == "s3" else None),
        )

    header = signed(stack, "GET", f"{stack.aws_url}/{BUCKET}?list-type=2", "s3", {}, region="eu-west-1")
    assert header.status_code == 400 and "<Code>AuthorizationHeaderMalformed</Code>" in header.text
    assert "the region 'eu-west-1' is wrong; expecting 'us-east-1'" in header.text
    assert "<Region>us-east-1</Region>" in header.text  # what an SDK reads to ask again in the right region
    presigned = elsewhere("s3").generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "k"})
    query = requests.get(presigned, timeout=30)
    assert query.status_code == 400 and "<Code>AuthorizationQueryParametersError</Code>" in query.text
    assert "<Region>us-east-1</Region>" in query.text
    assert error_of(lambda: elsewhere("dynamodb").list_tables()) == (400, "InvalidSignatureException")
    assert error_of(lambda: elsewhere("s3vectors").list_vector_buckets()) == (403, "InvalidSignatureException")
    with pytest.raises(ClientError) as vectors:
        elsewhere("s3vectors").list_vector_buckets()
    message = vectors.value.response["Error"]["Message"]
    assert "Credential should be scoped to a valid region, not 'eu-west-1'" in message


def test_the_printed_credentials_are_kept_with_the_state_and_readable_by_their_owner_only(tmp_path):
    from memory_hub_local.identity import SEED_FILE
    from memory_hub_local.identity import Credentials as Local

    first, again = Local.create(tmp_path), Local.create(tmp_path)
    assert first.operator == again.operator and first.function("AdminFunction") == again.function("AdminFunction")
    assert (tmp_path / SEED_FILE).stat().st_mode & 0o077 == 0
    assert Local.create(None).operator != Local.create(None).operator  # an ephemeral stack: fresh ones
    assert first.operator.secret != first.function("AdminFunction").secret


def test_an_object_over_64_mib_is_refused_as_s3_refuses_an_entity_too_large(stack):
    """The local stack holds objects of at most 64 MiB (an import's upload limit): a larger PUT gets
    S3's EntityTooLarge error, not a bare 400."""
    s3 = client(stack, "s3")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "surfaces/large.bin"}, ExpiresIn=600)
    answer = requests.put(url, data=b"\0" * (64 * 1024 * 1024 + 1), timeout=120)
    assert answer.status_code == 400 and "<Code>EntityTooLarge</Code>" in answer.text, answer.text[:300]
    assert "<ProposedSize>67108865</ProposedSize>" in answer.text
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="surfaces/large.bin")
