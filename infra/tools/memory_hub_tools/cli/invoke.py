"""``invoke`` and ``cleanup``: one function of the running stack (or, with ``--aws``, of a deployment)
through the Lambda Invoke API: ``--lambda-endpoint``, else ``MEMORY_HUB_LAMBDA_ENDPOINT``, else
http://127.0.0.1:$LAMBDA_PORT (default 3001)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, UsageError, say
from .flags import positive


def _invoke(args: argparse.Namespace) -> int:
    """Run one function of the running stack with one event, like ``sam local invoke``."""
    if args.aws and args.lambda_endpoint:
        raise UsageError("--aws and --lambda-endpoint exclude each other")
    if args.event == "-":
        event = sys.stdin.read()
    else:
        try:
            event = Path(args.event).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{args.event}: cannot read the event: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        parsed = json.loads(event)
    except ValueError as exc:
        raise UsageError(f"{args.event}: not JSON ({exc})") from None
    key = args.api_key or os.environ.get("MEMORY_HUB_API_KEY")
    if key and isinstance(parsed, dict) and isinstance(parsed.get("headers"), dict):
        # the shipped events carry the test key; a running stack knows its own
        parsed["headers"]["Authorization"] = f"Bearer {key}"
        if isinstance(parsed.get("multiValueHeaders"), dict):
            parsed["multiValueHeaders"]["Authorization"] = [f"Bearer {key}"]
        event = json.dumps(parsed)
    client, _, endpoint = _lambda_client(args)
    response = _invoke_once(args, client, endpoint, args.function, event.encode("utf-8"))
    if response is None:
        return EXIT_FAILED
    result = _payload(response)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if response.get("FunctionError"):
        message = result.get("errorMessage") if isinstance(result, dict) else None
        print(f"error: {args.function} failed: {message or response['FunctionError']}", file=sys.stderr)
        return EXIT_FAILED
    status = result.get("statusCode") if isinstance(result, dict) else None
    if isinstance(status, int) and status >= 400:
        message = _proxy_message(result)
        hint = (
            " (the event's API key is not one of this stack's: the shipped events/ carry the test key; "
            "pass --api-key or set MEMORY_HUB_API_KEY)"
            if status == 401 and "authorization" in message and not args.aws
            else ""
        )
        print(f"error: {args.function} answered {status}{message}{hint}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _proxy_message(result: dict[str, Any]) -> str:
    """The envelope message of an API Gateway proxy result (``: …``), or nothing."""
    body = result.get("body")
    if not isinstance(body, str):
        return ""
    if result.get("isBase64Encoded"):
        import base64
        import binascii

        try:
            body = base64.b64decode(body).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return ""
    try:
        envelope = json.loads(body)
    except ValueError:
        return ""
    message = envelope.get("message") if isinstance(envelope, dict) else None
    return f": {message}" if isinstance(message, str) and message else ""


def _template_functions() -> list[str] | None:
    """The logical ids of template.yaml's functions (None when the template cannot be read here)."""
    try:
        from ..template_file import load_raw

        resources = load_raw().get("Resources") or {}
    except Exception:  # noqa: BLE001 - only a hint for an error message: no template, no list
        return None
    return sorted(
        name
        for name, resource in resources.items()
        if isinstance(resource, dict) and resource.get("Type") in ("AWS::Serverless::Function", "AWS::Lambda::Function")
    )


def _no_function(args: argparse.Namespace, name: str) -> str:
    if args.aws:
        return f"no function {name} on AWS (with --aws, name the deployed function, e.g. from `sam list resources`)"
    functions = _template_functions()
    if not functions:
        return f"no function {name} (use a logical id of template.yaml, e.g. ScenarioFunction)"
    import difflib

    by_lower = {f.lower(): f for f in functions}
    close = [f for f in functions if name and f.lower().startswith(name.lower())]
    close = close or [by_lower[f] for f in difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.8)]
    hint = f" (did you mean {close[0]}?)" if len(close) == 1 else ""
    return f"no function {name}{hint}; the template has: {', '.join(functions)}"


def _invoke_once(args: argparse.Namespace, client: Any, endpoint: str, name: str, payload: bytes) -> Any:
    """One synchronous invocation; ``None`` after printing one line when it could not run."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

    try:
        return client.invoke(FunctionName=name, InvocationType="RequestResponse", Payload=payload)
    except client.exceptions.ResourceNotFoundException:
        print(f"error: {_no_function(args, name)}", file=sys.stderr)
    except EndpointConnectionError:
        where = "AWS Lambda" if args.aws else f"the Lambda Invoke API at {endpoint}"
        hint = (
            ""
            if args.aws
            else " (is `make run` running? Its port: LAMBDA_PORT, $MEMORY_HUB_LAMBDA_ENDPOINT or --lambda-endpoint)"
        )
        print(f"error: cannot reach {where}{hint}", file=sys.stderr)
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        text = error.get("Message") or error.get("Code") or str(exc)
        print(f"error: cannot invoke {name}: {status or ''} {text}".replace("  ", " "), file=sys.stderr)
    except BotoCoreError as exc:
        print(f"error: cannot invoke {name}: {exc}", file=sys.stderr)
    return None


def scheduled_event(region: str) -> dict[str, Any]:
    """The payload EventBridge sends for a scheduled rule."""
    import uuid
    from datetime import datetime

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [],
        "detail": {},
    }


def lambda_endpoint(args: argparse.Namespace) -> str:
    """The running stack's Lambda Invoke API: --lambda-endpoint, else $MEMORY_HUB_LAMBDA_ENDPOINT, else
    http://127.0.0.1:$LAMBDA_PORT (the port `make run` serves it on; 3001 by default)."""
    endpoint = args.lambda_endpoint or os.environ.get("MEMORY_HUB_LAMBDA_ENDPOINT")
    if not endpoint:
        port = (os.environ.get("LAMBDA_PORT") or "").strip() or "3001"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"LAMBDA_PORT={port!r} is not a port number")
        endpoint = f"http://127.0.0.1:{int(port)}"
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"Lambda endpoint {endpoint!r}: expected http://host:port")
    return endpoint.rstrip("/")


def _lambda_client(args: argparse.Namespace) -> tuple[Any, str, str]:
    """A Lambda client, the region, and where it points (for messages)."""
    import boto3
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(read_timeout=960, connect_timeout=10, retries={"max_attempts": 0})
    if args.aws:
        return boto3.client("lambda", region_name=region, config=config), region, "AWS Lambda"
    # The local stack's Invoke API (like `sam local start-lambda`) ignores the signature: static
    # placeholder credentials, so no real ones are ever looked up or sent to it.
    endpoint = lambda_endpoint(args)
    client = boto3.client(
        "lambda",
        endpoint_url=endpoint,
        region_name=region,
        config=config,
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - the local Invoke API checks no signature
    )
    return client, region, endpoint


def _cleanup(args: argparse.Namespace) -> int:
    if args.aws and args.lambda_endpoint:
        raise UsageError("--aws and --lambda-endpoint exclude each other")
    if args.max_runs < 1:
        raise UsageError("--max-runs: at least 1")
    client, region, endpoint = _lambda_client(args)
    for run in range(1, args.max_runs + 1):
        payload = json.dumps(scheduled_event(region)).encode()
        response = _invoke_once(args, client, endpoint, args.function_name, payload)
        if response is None:
            return EXIT_FAILED
        result = _payload(response)
        if response.get("FunctionError"):
            message = result.get("errorMessage") if isinstance(result, dict) else result
            print(f"error: run {run}: {args.function_name} failed: {message}", file=sys.stderr)
            return EXIT_FAILED
        if args.json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
        else:
            say(args, f"run {run}: {json.dumps(result, ensure_ascii=False)}")
        if not isinstance(result, dict) or result.get("done") is not False:
            return EXIT_OK
    print(f"error: work left after {args.max_runs} runs; run cleanup again to continue", file=sys.stderr)
    return EXIT_FAILED


def add_invoke(sub: Any) -> None:
    invoke = sub.add_parser(
        "invoke", help="run one function of the running stack with one event (like `sam local invoke`)"
    )
    invoke.add_argument("function", help="logical id in template.yaml, e.g. ScenarioFunction")
    invoke.add_argument("event", help="event JSON file (or - for stdin)")
    invoke.add_argument(
        "--lambda-endpoint",
        default=None,
        help="Lambda Invoke API (default: $MEMORY_HUB_LAMBDA_ENDPOINT or "
        "http://127.0.0.1:$LAMBDA_PORT, the running stack's)",
    )
    invoke.add_argument(
        "--api-key",
        default=None,
        help="put this key into the event's Authorization header (default: $MEMORY_HUB_API_KEY; "
        "without either, the event's own)",
    )
    invoke.add_argument("--aws", action="store_true", help="invoke the deployed function on AWS instead")
    invoke.set_defaults(run=_invoke)


def add_cleanup(sub: Any) -> None:
    cleanup = sub.add_parser(
        "cleanup",
        help="run the scheduled retention cleanup now (Lambda Invoke API)",
        description="Invoke the cleanup function with a scheduled-event payload, again while it answers "
        "done=false (at most --max-runs times), printing each result.",
    )
    cleanup.add_argument(
        "--lambda-endpoint",
        default=None,
        help="Lambda Invoke API (default: $MEMORY_HUB_LAMBDA_ENDPOINT or "
        "http://127.0.0.1:$LAMBDA_PORT, the running stack's; LAMBDA_PORT defaults to 3001)",
    )
    cleanup.add_argument(
        "--aws",
        action="store_true",
        help="use AWS's own Lambda endpoint and your AWS configuration "
        "(then --function-name is the deployed function's name)",
    )
    cleanup.add_argument("--function-name", default="CleanupFunction")
    cleanup.add_argument("--max-runs", type=positive, default=10, help="at most this many invocations (10)")
    cleanup.add_argument("--json", action="store_true", help="one JSON result per line")
    cleanup.set_defaults(run=_cleanup)


def _payload(response: dict[str, Any]) -> Any:
    """An invocation's answer: its JSON, or its text when it is not JSON."""
    raw = response["Payload"].read()
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode("utf-8", "replace")
