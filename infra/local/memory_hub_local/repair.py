"""``memory-hub local repair`` (also ``python -m memory_hub_local.repair``): put a damaged journal
right, on purpose, once the local stack refused to start on it.

A damaged journal holds bytes that are no whole record with whole records after them (``journal``:
a crash only tears the end; this is a disk's error or an edit). The stack refuses to start on it and
changes nothing. This command, with the stack stopped (it takes the data directory's lock):

1. copies every journal segment into ``<data dir>/journal-damaged-<UTC time>/`` (and links the
   snapshot there, which nothing rewrites in place), fsync'd, before it changes anything;
2. by default cuts the journal at the first damage: that segment is truncated there and the later
   segments are deleted. The account is then exactly as it was when the last record before the
   damage was answered — a state it really was in — and every change answered after it is lost
   (counted here). With ``--drop-damaged`` it drops the damaged bytes alone and keeps every whole
   record after them: each later change is kept, but the account may be in a state it never was
   in. A record is one request to an emulated service, and one API request makes several (an
   object, then the items that index it, then the idempotency record that says it was done): the
   request whose record was damaged may be half there, and a later change that relied on it is
   replayed without it (a put, a delete or a transaction's writes land as made — a transaction's
   condition check is not evaluated again —, an update is computed anew on what is there, and one
   that no longer applies is skipped, the start saying so). Hence it is asked for, not the default.

It says what it found, what it did and where the copy is. The copy holds what the journal held,
content deleted since included: remove it once the repaired stack holds what it should."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from .aws.journal import (
    Damage,
    Layout,
    damage,
    examine,
    fsync_directory,
    intact_after,
    lock_data_dir,
    segment_path,
    segments,
)

SNAPSHOT = "state.json.gz"  # aws.state.SNAPSHOT (not imported: that imports moto)
BACKUP_PREFIX = "journal-damaged-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memory-hub local repair",
        description="Repair a local stack's damaged journal (the stack refused to start on it). A copy of "
        "the journal is kept first, in <data dir>/journal-damaged-<time>/.",
    )
    parser.add_argument("--data-dir", required=True, help="the stack's data directory (as given to memory-hub local)")
    parser.add_argument(
        "--drop-damaged",
        action="store_true",
        help="drop only the damaged bytes and keep every intact record after them (the account may then hold "
        "half of the API request whose record was damaged); without it the journal is cut at the first damage",
    )
    args = parser.parse_args(argv)
    directory = Path(args.data_dir)
    if not directory.is_dir():
        print(f"memory-hub local repair: no data directory {directory}", file=sys.stderr)
        return 2
    try:
        lock = lock_data_dir(directory, wait_s=0.0)
    except RuntimeError as exc:
        print(f"memory-hub local repair: {exc}: stop it first", file=sys.stderr)
        return 1
    try:
        return repair(directory, args.drop_damaged)
    finally:
        os.close(lock)


def repair(directory: Path, drop_damaged: bool) -> int:
    """Repair the journal in ``directory`` (held locked by the caller); the exit status."""
    found = examine(directory, first_segment(directory), None)
    damaged = damage(found)
    if not damaged:
        torn = [(s.path.name, s.size - s.tail) for s in found if s.tail < s.size]
        note = "; ".join(f"{name}: a torn last record ({size} bytes), dropped at the next start" for name, size in torn)
        print(f"the journal in {directory} is not damaged: nothing to repair" + (f" ({note})" if note else ""))
        return 0
    later = intact_after(found, damaged[0])
    for one in damaged:
        print(f"damaged: {one}{describe(one)}")
    backup = keep_copy(directory)
    print(f"copied the journal as it was to {backup}")
    if drop_damaged:
        for segment in found:
            if any(d.path == segment.path for d in damaged):
                rewrite_whole(segment)
        dropped = sum(d.end - d.start for d in damaged)
        print(
            f"dropped the {dropped} damaged bytes and kept the {later} intact records after them; the API request "
            "a damaged record belonged to may be half there (the next start names any change that no longer applies)"
        )
    else:
        cut_at(found, damaged[0])
        print(f"cut the journal at {damaged[0].path} byte offset {damaged[0].start}: {later} later records are gone")
    fsync_directory(directory)
    print(f"the stack starts again; remove {backup} once it holds what it should (it keeps deleted content)")
    return 0


def first_segment(directory: Path) -> int:
    """The first journal segment the snapshot does not hold (its header's ``journal``; 0 with none)."""
    path = directory / SNAPSHOT
    if not path.exists():
        return 0
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        header = json.loads(handle.readline())
    return int(header.get("journal", 0)) if header.get("format") in (1, 2, 3) else 0


def describe(damaged: Damage) -> str:
    """What the damaged bytes seem to have been, when they start with a record's header and meta
    (unchecked: the checksum did not match)."""
    with open(damaged.path, "rb") as handle:
        handle.seek(damaged.start)
        head = handle.read(min(damaged.end - damaged.start, 64 * 1024))
    if len(head) < 12:
        return ""
    length = int.from_bytes(head[:4], "little")
    meta_length = int.from_bytes(head[8:12], "little")
    if 8 + length != damaged.end - damaged.start or 12 + meta_length > len(head):
        return ""
    try:
        meta = json.loads(head[12 : 12 + meta_length])
        target = {k.lower(): v for k, v in meta["h"].items()}.get("x-amz-target", "")
        return f": probably {meta['m']} {meta['p'][:200]}" + (f" ({target})" if target else "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def keep_copy(directory: Path) -> Path:
    """Every journal segment copied (and the snapshot linked) into a new folder, fsync'd."""
    backup = directory / (BACKUP_PREFIX + datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ"))
    backup.mkdir()
    for number in segments(directory):
        source = segment_path(directory, number)
        shutil.copyfile(source, backup / source.name)
        with open(backup / source.name, "rb") as handle:
            os.fsync(handle.fileno())
    snapshot = directory / SNAPSHOT
    if snapshot.exists():
        try:
            os.link(snapshot, backup / SNAPSHOT)  # replaced by a rename, never rewritten: a link keeps it
        except OSError:
            shutil.copyfile(snapshot, backup / SNAPSHOT)
    fsync_directory(backup)
    fsync_directory(directory)
    return backup


def rewrite_whole(segment: Layout) -> None:
    """Write the segment again with its whole records alone (a temporary file renamed over it)."""
    data = segment.path.read_bytes()
    temporary = segment.path.with_name(f".{segment.path.name}.repair")
    try:
        with open(temporary, "wb") as out:
            for start, end in segment.spans:
                out.write(data[start:end])
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, segment.path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def cut_at(found: list[Layout], first: Damage) -> None:
    """Truncate the journal at ``first``: its segment there, the later segments deleted."""
    after = False
    for segment in found:
        if after:
            segment.path.unlink()
        elif segment.path == first.path:
            with open(segment.path, "r+b") as handle:
                handle.truncate(first.start)
                os.fsync(handle.fileno())
            after = True


if __name__ == "__main__":
    sys.exit(main())
