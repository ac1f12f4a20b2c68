"""Logs and metrics: one EMF count per request, and never a body, content or key in the output."""

import json

from helpers import ADMIN_KEY


def test_each_request_counts_once_by_route_and_status_class(monkeypatch, capsys):
    from memory_hub.observability import count_request

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    count_request("/v3/scenario/read", 404)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert len(lines) == 1
    emf = lines[0]
    assert emf["route"] == "/v3/scenario/read" and emf["status"] == "4xx" and emf["Requests"] in (1, [1.0])
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "MemoryHub"


def test_logs_never_hold_content_bodies_or_keys(api, scope, caplog):
    marker = "secret-marker-7f3a9c"
    caplog.set_level("DEBUG")
    api.post("/v3/scenario/write", scope.body(path="logged.md", content=marker, summary=marker))
    api.post("/v3/conversation/add", scope.body(session_id="s", messages=[{"role": "user", "content": marker}]))
    api.post("/v3/atomic/add", scope.body(content=marker))
    api.post("/v3/scenario/write", scope.body(path="../bad.md", content=marker))  # an error path too
    records = [r for r in caplog.records if r.name == "memory-hub"]
    assert sum(1 for r in records if r.getMessage() == "request") >= 4  # one line per request...
    assert {"path", "status", "ms"} <= set(vars(next(r for r in records if r.getMessage() == "request")))
    for record in records:  # ...holding neither content nor the key, in message or extras
        text = repr(vars(record))
        assert marker not in text and ADMIN_KEY not in text
