"""The durability bench's pure parts: counting what a restarted stack kept, reading the banner and
the replay line of ``make run``'s output, the journal's size on disk, a /proc stat line, and the
report (no stack, no processes)."""

from __future__ import annotations

from memory_hub_bench.durability import ADD, WRITE, Disk, Round, banner, replayed, table, tally
from memory_hub_bench.memory import Process

BANNER = """journal: replayed 61 changes in 0.4 s
Memory Hub local stack (region us-east-1; state in /tmp/x/state)
  API          http://127.0.0.1:40001   (console: /console, docs: /docs, spec: /openapi.json)
  Lambda API   http://127.0.0.1:40002   (aws lambda invoke --endpoint-url …)
  AWS endpoint http://127.0.0.1:40003   (aws s3 ls --endpoint-url …)
  service id   default
  admin key    mhk_000000000000_key
For the AWS CLI against it (these credentials open every table, object and secret of the local
account, the admin key included: keep them to yourself):
  export AWS_ENDPOINT_URL=http://127.0.0.1:40003
  unset AWS_SESSION_TOKEN

"""


def test_only_acknowledged_writes_count_as_present_and_the_rest_is_lost() -> None:
    kept = tally(ADD, ["m1", "m2", "m3"], ["m1", "m3", "m9"], held=3)
    assert (kept.acknowledged, kept.present, kept.lost, kept.held) == (3, 2, 1, 3)
    assert kept.applied_twice is None
    files = tally(WRITE, {"a.md": "x", "b.md": "y"}, ["a.md", "b.md"], held=2, applied_twice=0)
    assert (files.acknowledged, files.present, files.lost, files.applied_twice) == (2, 2, 0, 0)


def test_the_banner_is_read_once_whole() -> None:
    assert banner(BANNER) == {
        "api_url": "http://127.0.0.1:40001",
        "aws_url": "http://127.0.0.1:40003",
        "admin_key": "mhk_000000000000_key",
    }
    assert banner(BANNER.rstrip("\n") + "\n") is None, "the blank line that ends it is not there yet"
    assert banner(BANNER.split("  admin key")[0]) is None
    assert banner("") is None


def test_the_changes_replayed_are_read_from_the_output() -> None:
    assert replayed(BANNER) == 61
    assert replayed("Memory Hub local stack\n") == 0


def test_the_journal_on_disk_counts_segments_and_the_snapshot(tmp_path) -> None:
    (tmp_path / "journal.00000003").write_bytes(b"x" * 100)
    (tmp_path / "journal.00000004").write_bytes(b"x" * 20)
    (tmp_path / "state.json.gz").write_bytes(b"x" * 7)
    (tmp_path / "journal.3").write_bytes(b"not a segment")
    (tmp_path / "lock").write_bytes(b"")
    assert Disk.read(tmp_path) == Disk(segments=2, journal_bytes=120, snapshot_bytes=7)


def test_a_proc_stat_line_is_read_past_a_name_with_brackets_and_spaces() -> None:
    line = "4242 (python3 (x) y) S 17 4200 4200 0 -1 4194560 1234 0 0 0"
    assert Process.parse(4242, line) == Process(4242, "S", 17, 4200)


def test_the_report_has_a_row_per_kind_of_write_and_one_per_round() -> None:
    rounds = [
        Round(
            "crash", [tally(ADD, ["m1"], ["m1"], 1), tally(WRITE, ["a"], [], 0, 0)], 0.04, Disk(1, 2048, 0), 5, 3.2, 4.0
        ),
        Round(
            "crash during compaction",
            [tally(ADD, ["m2"], ["m2"], 1)],
            1.5,
            Disk(2, 1024, 512),
            7,
            3,
            4,
            "the SIGKILL landed while its child ran",
        ),
    ]
    lines = table(rounds)
    assert "| crash | conversation/add (1 message) | 1 | 1 | 0 | 1 | – |" in lines
    assert "| crash | scenario/write | 1 | 0 | 1 | 0 | 0 |" in lines
    assert "| crash | 0.04 | 2 (1) | 0.0 | 5 | 3.2 | 4.0 |" in lines
    assert "| crash during compaction | 1.50 | 1 (2) | 0.5 | 7 | 3.0 | 4.0 |" in lines
    assert lines[-1] == "\ncrash during compaction: the SIGKILL landed while its child ran."
    assert rounds[0].lost == 1 and rounds[0].result()["writes"][1]["lost"] == 1
    assert (
        rounds[1].result()["compaction_at_kill"].startswith("the SIGKILL")
        and rounds[0].result()["compaction_at_kill"] is None
    )
