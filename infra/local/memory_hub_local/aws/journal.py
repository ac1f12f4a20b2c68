"""The journal that keeps every acknowledged change of the emulated account on disk.

Each successful mutating request to a service the snapshot holds (DynamoDB, S3, Secrets Manager,
S3 Vectors) is appended as it was received — method, path, headers and body — with the values
moto made up for it (an object's LastModified, a vector bucket's or index's creation time), and
the journal is fsync'd before the answer goes out. Requests that arrive while an fsync is under
way share the next one (group commit), so a write costs one append plus at most one fsync,
whatever the account holds. Any answer — a read too — waits until everything journalled before
it is on disk, so nothing a client saw can be lost by a crash.

On disk, in the data directory: ``state.json.gz`` (the snapshot, which names the first segment it
does not contain) and segments ``journal.<n>``. A record is ``length (u32) | crc32 (u32) |
payload``, the payload ``meta length (u32) | meta (JSON) | body``. At a start the snapshot is
loaded and the segments from the one it names on are replayed in order through the same moto
path the requests took (with the recorded made-up values put back), so replay reproduces the
account byte for byte. A record's meta is a JSON object, so its payload starts ``{`` 12 bytes in.

A crash can only tear the end of the journal: each record is on disk before an answer leaves, and
only later records are written after it. So bytes that hold no whole record (short, a checksum
that does not match) are a torn tail when no whole record follows them anywhere in the journal —
dropped (never answered), and the start goes on — and damage when one does (a disk's error, an
edit): the start refuses, names the file and the byte offset and changes nothing, for the
operator's ``memory-hub local repair`` (``repair.py``) to decide. Whole records after damage are
found again by their own length, else by the first offset where a whole record starts.

Compaction runs off the request path: under the lock only the current segment is closed and a new
one opened; a child process (``python -m memory_hub_local.aws --compact-upto N``) loads the last
snapshot, replays the closed segments, and writes the new snapshot (temporary file, fsync,
rename, fsync of the directory). Only then are the segments it holds deleted. A crash at any
point leaves either the old snapshot and all segments, or the new snapshot (which names the
segments it holds, so none is replayed twice). A change that erases something starts a compaction
soon (``ERASURE_QUIET_S``), so erased content does not stay on disk."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import re
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The services whose state the snapshot holds; the others (SQS, Bedrock) are not kept.
KEPT_SERVICES = frozenset({"dynamodb", "s3", "secretsmanager", "s3vectors"})
SEGMENT = re.compile(r"^journal\.(\d{8})$")
LOCK_FILE = "lock"
_HEADER = struct.Struct("<II")
_META = struct.Struct("<I")

# When the journal holds this many records or bytes beyond the snapshot, a compaction starts.
COMPACT_RECORDS = int(os.environ.get("MEMORY_HUB_COMPACT_RECORDS") or 5000)
COMPACT_BYTES = int(os.environ.get("MEMORY_HUB_COMPACT_BYTES") or 64 * 1024 * 1024)
# After an erasure (items, objects or vectors deleted) a compaction starts once no other erasure
# came for ERASURE_QUIET_S, or ERASURE_LATEST_S after the first one: the journal and the last
# snapshot still hold what was erased, and that should leave the disk within seconds, not when
# the journal next grows past the thresholds above.
# Such a compaction also waits, after the last one ended, as long as that one took: on a large
# account (a compaction of minutes) deletes one after another keep at most half a core busy.
ERASURE_QUIET_S = 1.0
ERASURE_LATEST_S = 10.0
# Tests only: the compaction child stops at this point ("replayed" or "saved") and waits forever.
PAUSE_VARIABLE = "MEMORY_HUB_TEST_COMPACT_PAUSE"
PAUSED_MARKER = "compaction-paused"


def segment_path(directory: Path, number: int) -> Path:
    return directory / f"journal.{number:08d}"


def segments(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := SEGMENT.match(p.name)))


def fsync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def encode(meta: dict[str, Any], body: bytes) -> list[bytes]:
    """One record as the buffers to write (the body is not copied)."""
    head = json.dumps(meta, separators=(",", ":")).encode()
    prefix = _META.pack(len(head)) + head
    checksum = zlib.crc32(body, zlib.crc32(prefix))
    return [_HEADER.pack(len(prefix) + len(body), checksum), prefix, body]


@dataclass
class Record:
    meta: dict[str, Any]
    body: bytes


def _parse(data: bytes, offset: int) -> tuple[dict[str, Any], int, int] | None:
    """The whole record that starts at ``offset``: its meta, where its body starts and where it
    ends; None when none does (cut short, a checksum that does not match, a meta that is not a
    JSON object)."""
    if offset + _HEADER.size + _META.size > len(data):
        return None
    length, checksum = _HEADER.unpack_from(data, offset)
    start, end = offset + _HEADER.size, offset + _HEADER.size + length
    if end > len(data) or length < _META.size:
        return None
    (meta_length,) = _META.unpack_from(data, start)
    meta_start, body = start + _META.size, start + _META.size + meta_length
    if body > end or data[meta_start : meta_start + 1] != b"{" or data[body - 1 : body] != b"}":
        return None  # (cheap refusals first: a scan for the next record tries many offsets)
    if zlib.crc32(memoryview(data)[start:end]) != checksum:
        return None
    try:
        meta = json.loads(data[meta_start:body])
    except ValueError:
        return None
    return (meta, body, end) if isinstance(meta, dict) else None


def _next_record(data: bytes, broken: int) -> int | None:
    """Where the first whole record after the one that breaks at ``broken`` starts (None: none).
    First where that record's own length puts the next one (its body or checksum was damaged:
    what its bytes hold is skipped whole, records a body may carry included); else the first
    offset after it where a whole record starts — found by its meta's opening brace, 12 bytes in
    (a zeroed tail holds none, so it is scanned at the speed of ``bytes.find``)."""
    if broken + _HEADER.size <= len(data):
        length: int = _HEADER.unpack_from(data, broken)[0]
        after = broken + _HEADER.size + length
        if after < len(data) and _parse(data, after) is not None:
            return after
    inset = _HEADER.size + _META.size
    brace = data.find(b"{", broken + 1 + inset)
    while brace >= 0:
        if _parse(data, brace - inset) is not None:
            return brace - inset
        brace = data.find(b"{", brace + 1)
    return None


@dataclass
class Layout:
    """What a segment holds: the spans of its whole records and the gaps between and after them
    (byte ranges that hold no whole record), both in order, together covering the whole file. A
    gap before a whole record is damage; a gap at the end is a tail a crash may have torn."""

    number: int
    path: Path
    size: int
    spans: list[tuple[int, int]]
    gaps: list[tuple[int, int]]

    @property
    def tail(self) -> int:
        """Where the tail after the last whole record begins (the size when there is none)."""
        return self.gaps[-1][0] if self.gaps and self.gaps[-1][1] == self.size else self.size


def layout(path: Path, number: int = -1, data: bytes | None = None) -> Layout:
    data = path.read_bytes() if data is None else data
    spans: list[tuple[int, int]] = []
    gaps: list[tuple[int, int]] = []
    offset = 0
    while offset < len(data):
        parsed = _parse(data, offset)
        if parsed is not None:
            spans.append((offset, parsed[2]))
            offset = parsed[2]
            continue
        after = _next_record(data, offset)
        gaps.append((offset, len(data) if after is None else after))
        offset = gaps[-1][1]
    return Layout(number, path, len(data), spans, gaps)


def read(path: Path) -> tuple[list[Record], int, int]:
    """The whole records of a segment up to the first that is not, the offset where they end and
    the file's size (more than the offset when a record was cut short by a crash or does not
    match its checksum — at the end, or, see ``damage``, before intact records)."""
    data = path.read_bytes()
    found = layout(path, data=data)
    end = found.gaps[0][0] if found.gaps else len(data)
    return [_record(data, span) for span in found.spans if span[1] <= end], end, len(data)


def _record(data: bytes, span: tuple[int, int]) -> Record:
    """The record of a span ``layout`` found whole (its checksum is not taken again)."""
    start, end = span
    (meta_length,) = _META.unpack_from(data, start + _HEADER.size)
    body = start + _HEADER.size + _META.size + meta_length
    return Record(json.loads(data[start + _HEADER.size + _META.size : body]), data[body:end])


@dataclass(frozen=True)
class Damage:
    """Bytes of a segment that hold no whole record, with whole records after them (in that
    segment or a later one): not a tail a crash tore, as every record was on disk before the next
    was written after it."""

    path: Path
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.path} at byte offset {self.start} ({self.end - self.start} bytes that hold no whole record)"


class Damaged(RuntimeError):
    """The journal holds damage (see ``Damage``): nothing was applied, nothing on disk changed."""

    def __init__(self, directory: Path, damage: list[Damage], intact_after: int) -> None:
        self.directory, self.damage, self.intact_after = directory, damage, intact_after
        where = "; ".join(str(d) for d in damage[:5]) + (f"; and {len(damage) - 5} more" if len(damage) > 5 else "")
        super().__init__(
            f"the journal is damaged: {where}, and {intact_after} intact records follow. Nothing was changed: "
            f"the stack does not start on a journal it would have to cut short. `{REPAIR_COMMAND} --data-dir "
            f"{directory}` keeps a copy of the journal, then cuts it at the damage (the records after it are "
            "lost); add --drop-damaged to keep every intact record and lose only the damaged bytes."
        )


REPAIR_COMMAND = "memory-hub local repair"


def examine(directory: Path, first: int, upto: int | None) -> list[Layout]:
    """The layout of segments ``first`` … ``upto - 1`` (all when ``upto`` is None)."""
    return [
        layout(segment_path(directory, n), n) for n in segments(directory) if n >= first and (upto is None or n < upto)
    ]


def damage(found: list[Layout], whole: bool = False) -> list[Damage]:
    """The damage in these segments (in order): every gap that whole records follow, in its segment
    or a later one. A gap at the end of the journal is a tail a crash tore — unless ``whole`` (the
    segments were closed whole: any gap is damage)."""
    out: list[Damage] = []
    later = False  # a later segment holds a whole record
    for segment in reversed(found):
        for start, end in reversed(segment.gaps):
            if end < segment.size or later or whole:
                out.append(Damage(segment.path, start, end))
        later = later or bool(segment.spans)
    return out[::-1]


def intact_after(found: list[Layout], first: Damage) -> int:
    """How many whole records lie after ``first`` (what cutting the journal there would lose)."""
    at = [segment.path for segment in found].index(first.path)
    return sum(1 for s in found[at].spans if s[0] >= first.end) + sum(len(s.spans) for s in found[at + 1 :])


def replay(
    directory: Path,
    first: int,
    upto: int | None,
    apply: Callable[[Record], None],
    repair: bool,
) -> Iterator[tuple[int, int, int, int]]:
    """Apply the records of segments ``first`` … ``upto - 1`` (all when ``upto`` is None) in order;
    yields (segment, records, bytes kept, bytes dropped). ``repair`` (a start) cuts a torn tail off
    the end of the journal; without it (a compaction, whose segments were closed whole) a tail is
    damage too. Damage raises ``Damaged`` before anything is applied or changed on disk."""
    found = examine(directory, first, upto)
    damaged = damage(found, whole=not repair)
    if damaged:
        raise Damaged(directory, damaged, intact_after(found, damaged[0]))
    for segment in found:
        data = segment.path.read_bytes()
        for span in segment.spans:
            apply(_record(data, span))
        del data
        if repair and segment.tail < segment.size:
            with open(segment.path, "r+b") as handle:
                handle.truncate(segment.tail)
                os.fsync(handle.fileno())
        yield segment.number, len(segment.spans), segment.tail, segment.size - segment.tail


class Journal:
    """The open segment: appends (under the caller's lock, so the journal's order is the order the
    changes were made in) and fsyncs shared by whoever waits (group commit)."""

    def __init__(self, directory: Path, number: int) -> None:
        self.directory = directory
        self.number = number
        self._fd = self._open(number)
        self._cond = threading.Condition(threading.Lock())
        self._syncing = False
        self.written = 0  # bytes appended since the start (all segments)
        self.durable = 0  # of which are known to be on disk
        self.pending_records = 0  # beyond the snapshot
        self.pending_bytes = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # closed segment -> (records, bytes)
        self._segment_records = 0
        self._segment_bytes = 0
        self._erasure: tuple[float, float] | None = None  # (first, last) erasure since the last rotation
        self._rest_until = 0.0  # no compaction for erasures before this (see ERASURE_QUIET_S)

    def _open(self, number: int) -> int:
        fd = os.open(segment_path(self.directory, number), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fsync_directory(self.directory)
        return fd

    def count_replayed(self, number: int, records: int, size: int) -> None:
        """Segments kept from before this start count towards the next compaction."""
        self._sizes[number] = (records, size)
        self.pending_records += records
        self.pending_bytes += size

    def append(self, buffers: list[bytes]) -> None:
        size = sum(len(b) for b in buffers)
        with self._cond:
            done = os.writev(self._fd, buffers)
            if done != size:  # a short write (a full disk): finish it or fail loudly
                self._finish(b"".join(buffers)[done:], done)
            self.written += size
            self.pending_records += 1
            self.pending_bytes += size
            self._segment_records += 1
            self._segment_bytes += size

    def _finish(self, rest: bytes, done: int) -> None:
        """Write the rest of a record; when that fails, take back the part written (a record cut
        short with records appended after it would read as damage at the next start) and raise."""
        try:
            while rest:
                written = os.write(self._fd, rest)
                done, rest = done + written, rest[written:]
        except OSError:
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - done)
            raise

    def sync(self) -> None:
        """Return once everything appended so far is on disk."""
        with self._cond:
            target = self.written
            while self.durable < target:
                if self._syncing:
                    self._cond.wait()
                    continue
                self._syncing = True
                upto, fd = self.written, self._fd
                self._cond.release()
                try:
                    os.fdatasync(fd)
                finally:
                    self._cond.acquire()
                    self._syncing = False
                    self._cond.notify_all()
                self.durable = max(self.durable, upto)

    def note_erasure(self) -> None:
        """The change just appended erased something (see ERASURE_QUIET_S)."""
        now = time.monotonic()
        with self._cond:
            self._erasure = (self._erasure[0] if self._erasure else now, now)

    def wants_compaction(self) -> bool:
        if self.pending_records >= COMPACT_RECORDS or self.pending_bytes >= COMPACT_BYTES:
            return True
        erasure, now = self._erasure, time.monotonic()
        if erasure is None or now < self._rest_until:
            return False
        return now - erasure[1] >= ERASURE_QUIET_S or now - erasure[0] >= ERASURE_LATEST_S

    def compacted(self, took_s: float) -> None:
        """A compaction ended after ``took_s``: the next one for erasures waits as long."""
        self._rest_until = time.monotonic() + took_s

    def rotate(self) -> tuple[int, tuple[float, float] | None]:
        """Close the current segment (on disk) and open the next; returns the new one's number
        (every segment below it is closed) and the erasures they hold, which a compaction of them
        settles (``put_back_erasure`` when it fails). Call under the lock the appenders hold."""
        with self._cond:
            while self._syncing:
                self._cond.wait()
            os.fdatasync(self._fd)
            self.durable = self.written
            os.close(self._fd)
            self._sizes[self.number] = (self._segment_records, self._segment_bytes)
            self.number += 1
            self._segment_records = self._segment_bytes = 0
            self._fd = self._open(self.number)
            erasure, self._erasure = self._erasure, None
            return self.number, erasure

    def put_back_erasure(self, erasure: tuple[float, float] | None) -> None:
        """A compaction failed: the erasures of the segments it was to fold in are still on disk."""
        if erasure is not None:
            with self._cond:
                later = self._erasure
                self._erasure = (erasure[0], later[1]) if later else erasure

    def forget_below(self, number: int) -> None:
        """A snapshot now holds every segment below ``number``: delete them."""
        for old in segments(self.directory):
            if old < number:
                segment_path(self.directory, old).unlink(missing_ok=True)
        with self._cond:
            for old in [n for n in self._sizes if n < number]:
                records, size = self._sizes.pop(old)
                self.pending_records -= records
                self.pending_bytes -= size
        fsync_directory(self.directory)

    def close(self) -> None:
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self._fd >= 0:
                os.fdatasync(self._fd)
                os.close(self._fd)
                self._fd = -1


def lock_data_dir(directory: Path, wait_s: float = 15.0) -> int:
    """Hold the data directory for this process (two stacks on one directory would mix their
    journals). A stack killed a moment ago may still be exiting: wait a little for it."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError(f"the data directory {directory} is in use by another local stack") from exc
            time.sleep(0.1)


def die_with_parent(parent: int) -> None:
    """A compaction child ends when the stack that started it ends (Linux; elsewhere it finishes)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def pause_point(directory: Path, point: str) -> None:
    """Tests only: stop here forever when the environment asks for it."""
    if os.environ.get(PAUSE_VARIABLE) == point:
        (directory / PAUSED_MARKER).write_text(point)
        while True:
            time.sleep(3600)
