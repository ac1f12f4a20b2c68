"""The journal tells a torn tail from damage in the middle. Bytes that hold no whole record at the
end of the journal (cut short, zeros, garbage) are what a crash leaves: dropped, and the start goes
on. The same bytes with whole records after them — a byte flipped anywhere in a record, its length
and checksum included, or a closed segment cut short with later segments after it — are damage: a
start refuses with the file and the byte offset and changes nothing, and ``memory-hub local repair``
copies the journal aside, then cuts it at the damage or, asked to, drops the damaged bytes alone."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from memory_hub_local import repair
from memory_hub_local.aws import journal


def records(n: int, size: int = 7) -> list[tuple[dict, bytes]]:
    return [
        ({"m": "PUT", "p": f"/bucket/key{i}", "h": {"n": str(i)}}, bytes([65 + i % 26]) * (i * size)) for i in range(n)
    ]


def write(directory: Path, written: list[tuple[dict, bytes]], number: int = 0) -> Path:
    log = journal.Journal(directory, number)
    for meta, body in written:
        log.append(journal.encode(meta, body))
    log.close()
    return journal.segment_path(directory, number)


def boundaries(whole: bytes) -> list[int]:
    """Where each record starts, and the end."""
    starts, offset = [0], 0
    while offset < len(whole):
        offset += 8 + int.from_bytes(whole[offset : offset + 4], "little")
        starts.append(offset)
    return starts


def flip(path: Path, offset: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def replayed(directory: Path, repair_tail: bool = True) -> list[tuple[dict, bytes]]:
    applied: list[journal.Record] = []
    list(journal.replay(directory, 0, None, applied.append, repair=repair_tail))
    return [(r.meta, r.body) for r in applied]


def on_disk(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_byte_flipped_anywhere_in_a_middle_record_refuses_the_start_and_changes_nothing(tmp_path):
    written = records(3)
    path = write(tmp_path, written)
    whole = path.read_bytes()
    _, second, third, _ = boundaries(whole)
    for offset in range(second, third):  # the length, the checksum, the meta and the body
        path.write_bytes(whole)
        flip(path, offset, 0x80 if offset < second + 4 else 0x01)
        before = on_disk(tmp_path)
        applied: list[journal.Record] = []
        with pytest.raises(journal.Damaged) as raised:
            list(journal.replay(tmp_path, 0, None, applied.append, repair=True))
        assert applied == [] and on_disk(tmp_path) == before, "nothing applied, nothing changed"
        assert raised.value.damage == [journal.Damage(path, second, third)], offset
        assert raised.value.intact_after == 1
        message = str(raised.value)
        assert f"{path} at byte offset {second}" in message and "memory-hub local repair" in message


def test_what_a_crash_leaves_at_the_end_is_dropped_and_cut_off(tmp_path):
    written = records(4)
    path = write(tmp_path, written)
    whole = path.read_bytes()
    torn = journal.encode({"m": "PUT", "p": "/bucket/never-answered", "h": {}}, b"x" * 500)
    garbage = random.Random(7).randbytes(100_000)
    for tail in (b"".join(torn)[:300], b"\0" * 70_000, garbage, b"".join(torn)[:30] + b"\0" * 4096 + garbage):
        path.write_bytes(whole + tail)
        assert replayed(tmp_path) == written
        assert path.read_bytes() == whole, "the tail is cut off"
    for cut in range(boundaries(whole)[-2] + 1, len(whole)):  # the last record cut anywhere
        path.write_bytes(whole[:cut])
        assert replayed(tmp_path) == written[:-1]


def test_a_torn_tail_of_a_segment_with_whole_records_in_a_later_one_is_damage(tmp_path):
    first = write(tmp_path, records(3))
    write(tmp_path, records(2), number=1)
    whole = first.read_bytes()
    first.write_bytes(whole[:-5])  # a closed segment was on disk whole before the next one began
    with pytest.raises(journal.Damaged) as raised:
        replayed(tmp_path)
    assert raised.value.damage == [journal.Damage(first, boundaries(whole)[2], len(whole) - 5)]
    assert raised.value.intact_after == 2
    journal.segment_path(tmp_path, 1).write_bytes(b"")  # … but a later segment with nothing whole in it
    assert len(replayed(tmp_path)) == 2


def test_a_compaction_takes_any_bytes_that_are_no_whole_record_as_damage(tmp_path):
    written = records(3)
    path = write(tmp_path, written)
    path.write_bytes(path.read_bytes() + b"\0" * 16)
    with pytest.raises(journal.Damaged):
        replayed(tmp_path, repair_tail=False)
    assert path.read_bytes().endswith(b"\0" * 16)


def test_the_records_a_damaged_body_carried_are_not_taken_for_journal_records(tmp_path):
    inner = b"".join(journal.encode({"m": "DELETE", "p": "/bucket/everything", "h": {}}, b""))
    written = [*records(2), ({"m": "PUT", "p": "/bucket/a-journal", "h": {}}, inner * 3), *records(2)]
    path = write(tmp_path, written)
    starts = boundaries(path.read_bytes())
    flip(path, starts[3] - 5)  # in the carried records
    assert journal.damage(journal.examine(tmp_path, 0, None)) == [journal.Damage(path, starts[2], starts[3])]


def test_repair_copies_the_journal_then_cuts_it_at_the_damage(tmp_path, capsys):
    written = records(6)
    path = write(tmp_path, written)
    write(tmp_path, records(2), number=1)
    starts = boundaries(path.read_bytes())
    flip(path, starts[2] + 20)
    before = on_disk(tmp_path)
    assert repair.main(["--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (backup,) = tmp_path.glob("journal-damaged-*")
    assert {p.name: p.read_bytes() for p in backup.iterdir()} == before, "a copy of the journal as it was"
    assert f"byte offset {starts[2]}" in out and "5 later records are gone" in out and str(backup) in out
    assert replayed(tmp_path) == written[:2] and not journal.segment_path(tmp_path, 1).exists()
    assert repair.main(["--data-dir", str(tmp_path)]) == 0  # nothing left to repair: nothing copied
    assert "not damaged" in capsys.readouterr().out and len(list(tmp_path.glob("journal-damaged-*"))) == 1


def test_repair_drop_damaged_keeps_every_intact_record(tmp_path, capsys):
    written, later = records(6), records(3, size=11)
    path = write(tmp_path, written)
    second = write(tmp_path, later, number=1)
    starts = boundaries(path.read_bytes())
    flip(path, starts[1] + 2)  # a record's length
    flip(path, starts[4] + 60)  # another record's body
    second.write_bytes(second.read_bytes() + b"\0" * 100)  # and a torn tail at the end
    assert repair.main(["--data-dir", str(tmp_path), "--drop-damaged"]) == 0
    out = capsys.readouterr().out
    assert f"{path} at byte offset {starts[1]}" in out and f"{path} at byte offset {starts[4]}" in out
    assert "probably PUT /bucket/key4" in out, "what the damaged record seems to have been"
    assert replayed(tmp_path) == [w for i, w in enumerate(written) if i not in (1, 4)] + later


def test_repair_leaves_a_running_stack_alone(tmp_path, capsys):
    path = write(tmp_path, records(3))
    flip(path, boundaries(path.read_bytes())[1] + 20)
    held = journal.lock_data_dir(tmp_path)
    before = on_disk(tmp_path)
    try:
        assert repair.main(["--data-dir", str(tmp_path)]) == 1
    finally:
        os.close(held)
    assert "in use by another local stack" in capsys.readouterr().err and on_disk(tmp_path) == before


def test_repair_starts_from_the_segment_the_snapshot_names(tmp_path):
    import gzip

    with gzip.open(tmp_path / "state.json.gz", "wt") as out:
        out.write('{"format": 3, "journal": 2, "secrets": {}}\n')
    assert repair.first_segment(tmp_path) == 2


def test_finding_the_next_record_in_a_large_segment_takes_little_time(tmp_path):
    """A damaged length makes the scan look for the next record byte by byte (by its meta's brace)."""
    written = [({"m": "PUT", "p": f"/b/{i}", "h": {}}, random.Random(i).randbytes(1 << 20)) for i in range(24)]
    path = write(tmp_path, written)
    second = boundaries(path.read_bytes())[1]
    flip(path, 3, 0x10)  # the first record's length: far past the end
    started = time.perf_counter()
    (found,) = journal.damage(journal.examine(tmp_path, 0, None))
    took = time.perf_counter() - started
    assert found.start == 0 and found.end == second
    assert took < 10, took


def test_an_append_that_fails_half_way_takes_its_part_back(tmp_path, monkeypatch):
    """A full disk: the record that could not be written whole leaves no bytes behind, so the
    records appended once there is room again do not follow a broken one (which would be damage)."""
    written = records(3)
    log = journal.Journal(tmp_path, 0)
    log.append(journal.encode(*written[0]))
    real = os.writev

    def half(fd: int, buffers: list[bytes]) -> int:
        return real(fd, [b"".join(buffers)[:10]])

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal.os, "writev", half)
    monkeypatch.setattr(journal.os, "write", full)
    with pytest.raises(OSError):
        log.append(journal.encode({"m": "PUT", "p": "/never", "h": {}}, b"z" * 100))
    monkeypatch.undo()
    for meta, body in written[1:]:
        log.append(journal.encode(meta, body))
    log.close()
    assert replayed(tmp_path) == written
