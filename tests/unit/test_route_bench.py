"""The bench's CPU per request: read from /proc by kind of process, and counted around the request
alone (what a case does before it, such as making the record it deletes, is left out)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from memory_hub_bench import measure
from memory_hub_bench.cases import Case

BURN = """
import sys, time
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_child_s_cpu_is_read_under_its_kind():
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        used = measure.cpu_ms_by_kind({child.pid})
        assert 290 <= used["functions"] < 2000  # its 300 ms loop and its start (clock ticks: 10 ms)
        assert used["emulated AWS"] == 0
        assert measure.cpu_ms_by_kind()["functions"] >= used["functions"]  # a descendant of this process
    finally:
        child.communicate("")
    assert measure.cpu_ms_by_kind({child.pid}) == {"emulated AWS": 0.0, "functions": 0.0}  # gone: nothing


class _Clock:
    """A stand-in for /proc: the functions' CPU moves by 100 ms in ``before``, by 7 ms in a request."""

    def __init__(self) -> None:
        self.functions = 0.0

    def read(self, pids: object = None) -> dict[str, float]:
        return {"emulated AWS": 0.0, "functions": self.functions}


class _Target:
    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def post(self, path: str, body: dict) -> tuple[float, dict]:
        self.clock.functions += 7
        return 1.0, {}


def test_the_cpu_of_what_comes_before_a_request_is_left_out(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(measure, "cpu_ms_by_kind", clock.read)

    def before(i: int) -> None:
        clock.functions += 100

    row = measure.route(Case("/v3/x", lambda i: {}, before=before), _Target(clock), 5, None, None)  # type: ignore[arg-type]
    assert row.function_cpu_ms == 7 and row.aws_cpu_ms == 0


def test_the_bench_runs_its_stack_with_or_without_meaning():
    from memory_hub_bench.__main__ import parse

    assert parse([]).embeddings == "Enabled"  # the template's default
    assert parse(["--embeddings", "Disabled"]).embeddings == "Disabled"
    with pytest.raises(SystemExit):
        parse(["--embeddings", "off"])
