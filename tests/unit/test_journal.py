"""The local stack's journal format: what is appended reads back whole and in order; a record a
crash cut short at any byte, or one whose checksum does not match, ends the segment there and is
cut off when repaired; appends from many threads all reach the disk before ``sync`` returns."""

from __future__ import annotations

import threading

from memory_hub_local.aws import journal


def records(n: int) -> list[tuple[dict, bytes]]:
    return [({"m": "PUT", "p": f"/bucket/key{i}", "h": {"n": str(i)}}, bytes([i % 256]) * (i * 7)) for i in range(n)]


def write(tmp_path, written) -> journal.Journal:
    log = journal.Journal(tmp_path, 0)
    for meta, body in written:
        log.append(journal.encode(meta, body))
    log.sync()
    return log


def test_what_is_appended_reads_back_whole_and_in_order(tmp_path):
    written = records(20)
    write(tmp_path, written).close()
    read, end, size = journal.read(journal.segment_path(tmp_path, 0))
    assert [(r.meta, r.body) for r in read] == written
    assert end == size


def test_a_record_cut_short_anywhere_is_dropped_alone(tmp_path):
    written = records(3)
    write(tmp_path, written).close()
    path = journal.segment_path(tmp_path, 0)
    whole = path.read_bytes()
    for cut in range(1, len(whole)):
        read, end, size = journal.read(_copy(tmp_path, whole, cut))
        complete = sum(1 for boundary in _boundaries(whole) if boundary <= cut)
        assert len(read) == complete and end <= cut == size
        assert [(r.meta, r.body) for r in read] == written[:complete]


def test_a_checksum_that_does_not_match_ends_the_segment_and_repair_cuts_it_off(tmp_path):
    written = records(4)
    write(tmp_path, written).close()
    path = journal.segment_path(tmp_path, 0)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last record's body changed after its checksum was taken
    path.write_bytes(bytes(data))
    applied = []
    ((number, count, kept, dropped),) = journal.replay(tmp_path, 0, None, applied.append, repair=True)
    assert (number, count) == (0, 3) and [(r.meta, r.body) for r in applied] == written[:3]
    assert dropped > 0 and path.stat().st_size == kept


def test_replay_takes_the_segments_from_the_first_it_is_asked_for_up_to_a_bound(tmp_path):
    log = journal.Journal(tmp_path, 3)
    for meta, body in records(2):
        log.append(journal.encode(meta, body))
    assert log.rotate() == (4, None)
    log.append(journal.encode({"m": "later"}, b""))
    log.close()
    applied = []
    list(journal.replay(tmp_path, 3, 4, applied.append, repair=False))
    assert [r.meta["p"] for r in applied] == ["/bucket/key0", "/bucket/key1"]
    applied.clear()
    list(journal.replay(tmp_path, 4, None, applied.append, repair=False))
    assert [r.meta["m"] for r in applied] == ["later"]


def test_writers_on_many_threads_share_fsyncs_and_all_reach_the_disk(tmp_path):
    log = journal.Journal(tmp_path, 0)
    lock = threading.Lock()  # the emulated AWS side's lock: appends are ordered under it

    def writer(n: int) -> None:
        for i in range(50):
            with lock:
                log.append(journal.encode({"w": n, "i": i}, b"x" * i))
                mine = log.written
            log.sync()
            assert log.durable >= mine

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    read, end, size = journal.read(journal.segment_path(tmp_path, 0))
    assert len(read) == 400 and end == size
    for n in range(8):
        assert [r.meta["i"] for r in read if r.meta["w"] == n] == list(range(50))


def _copy(tmp_path, whole: bytes, length: int):
    path = tmp_path / "copy"
    path.write_bytes(whole[:length])
    return path


def _boundaries(whole: bytes) -> list[int]:
    ends, offset = [], 0
    while offset < len(whole):
        length = int.from_bytes(whole[offset : offset + 4], "little")
        offset += 8 + length
        ends.append(offset)
    return ends


def test_an_erasure_asks_for_a_compaction_once_quiet_or_after_the_latest_delay(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(journal.time, "monotonic", lambda: clock[0])
    log = journal.Journal(tmp_path, 0)
    log.append(journal.encode({"m": "DELETE"}, b""))
    assert not log.wants_compaction()  # one record: below the thresholds, nothing erased
    log.note_erasure()
    clock[0] += journal.ERASURE_QUIET_S / 2
    assert not log.wants_compaction()  # erasures may still be coming (a clear sends many)
    clock[0] += journal.ERASURE_QUIET_S
    assert log.wants_compaction()
    for _ in range(int(journal.ERASURE_LATEST_S / (journal.ERASURE_QUIET_S / 2)) + 1):  # never quiet
        log.note_erasure()
        clock[0] += journal.ERASURE_QUIET_S / 2
    assert log.wants_compaction()  # but not put off for ever
    log.close()


def test_a_rotation_hands_the_erasures_to_its_compaction_and_a_failed_one_gives_them_back(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(journal.time, "monotonic", lambda: clock[0])
    log = journal.Journal(tmp_path, 0)
    log.append(journal.encode({"m": "DELETE"}, b""))
    log.note_erasure()
    upto, erasure = log.rotate()
    assert upto == 1 and erasure == (1000.0, 1000.0)
    clock[0] += 60
    assert not log.wants_compaction()  # the compaction of segment 0 settles it
    log.put_back_erasure(erasure)  # … unless it failed
    assert log.wants_compaction()
    log.close()


def test_what_counts_as_an_erasure():
    from memory_hub_local.aws.server import _erases
    from memory_hub_local.aws.shapes import Call

    def call(service: str, operation: str, body: dict | None = None) -> Call:
        return Call(service, operation, None, body=body or {})

    put = {"PutRequest": {"Item": {}}}
    delete = {"DeleteRequest": {"Key": {}}}
    assert _erases(call("dynamodb", "DeleteItem"))
    assert _erases(call("dynamodb", "BatchWriteItem", {"RequestItems": {"T": [put, delete]}}))
    assert not _erases(call("dynamodb", "BatchWriteItem", {"RequestItems": {"T": [put]}}))
    assert _erases(call("dynamodb", "TransactWriteItems", {"TransactItems": [{"Put": {}}, {"Delete": {}}]}))
    assert not _erases(call("dynamodb", "TransactWriteItems", {"TransactItems": [{"Put": {}}, {"Update": {}}]}))
    assert not _erases(call("dynamodb", "PutItem")) and not _erases(call("dynamodb", "UpdateItem"))
    assert _erases(call("s3", "DeleteObject")) and _erases(call("s3", "DeleteObjects"))
    assert not _erases(call("s3", "PutObject")) and not _erases(call("s3", "CopyObject"))
    assert _erases(call("s3vectors", "DeleteVectors")) and not _erases(call("s3vectors", "PutVectors"))


def test_after_a_compaction_erasures_wait_as_long_as_it_took(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(journal.time, "monotonic", lambda: clock[0])
    log = journal.Journal(tmp_path, 0)
    log.append(journal.encode({"m": "DELETE"}, b""))
    log.compacted(30.0)  # a large account: the last compaction took 30 s
    log.note_erasure()
    clock[0] += journal.ERASURE_LATEST_S + 1
    assert not log.wants_compaction()  # deletes one after another do not keep a core compacting
    clock[0] += 30
    assert log.wants_compaction()
    log.close()
