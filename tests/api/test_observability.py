"""Logs and metrics: one EMF count per request, and never a body, content or key in the output —
read from what the functions (in their own processes) actually printed."""

import json
from pathlib import Path

from helpers import ADMIN_KEY, eventually


def _lines_since(path: Path, offset: int, wanted: int, marker: str = "") -> list[str]:
    """The log's lines after ``offset``, once they hold ``wanted`` request lines (holding ``marker``)."""

    def enough() -> list[str] | None:
        lines = path.read_bytes()[offset:].decode("utf-8", "replace").splitlines()
        said = sum(1 for line in lines if '"message":"request"' in line and marker in line)
        return lines if said >= wanted else None

    return eventually(enough, f"fewer than {wanted} request lines in {path}", timeout=10, every=0.05)


def test_each_request_logs_once_and_counts_once_by_route_and_status_class(api, scope, stack):
    log = Path(stack.log.name)
    offset = log.stat().st_size
    answer = api.post("/v3/scenario/read", scope.body(path="absent.md"))
    lines = _lines_since(log, offset, 1, answer.headers["x-request-id"])
    # the stack warms its functions in the background as it starts: their lines are not this request's
    requests = [
        json.loads(line) for line in lines if '"message":"request"' in line and answer.headers["x-request-id"] in line
    ]
    emf = [json.loads(line) for line in lines if '"_aws"' in line and "/v3/scenario/read" in line]
    assert len(requests) == 1 and requests[0]["path"] == "/v3/scenario/read" and requests[0]["status"] == 200
    assert {"path", "status", "ms", "correlation_id"} <= set(requests[0])
    assert len(emf) == 1 and emf[0]["status"] == "2xx" and emf[0]["Requests"] in (1, [1.0])
    assert emf[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "MemoryHub"


def test_logs_never_hold_content_bodies_or_keys(api, scope, stack):
    marker = "secret-marker-7f3a9c"
    log = Path(stack.log.name)
    offset = log.stat().st_size
    api.post("/v3/scenario/write", scope.body(path="logged.md", content=marker, summary=marker))
    api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": marker}]))
    api.post("/v3/atomic/add", scope.body(content=marker))
    api.post("/v3/scenario/write", scope.body(path="../bad.md", content=marker))  # an error path too
    lines = _lines_since(log, offset, 4)
    assert sum(1 for line in lines if '"message":"request"' in line) >= 4  # one line per request...
    text = "\n".join(lines)
    assert marker not in text and ADMIN_KEY not in text  # ...holding neither content nor the key
