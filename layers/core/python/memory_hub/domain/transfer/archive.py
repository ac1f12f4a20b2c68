"""The tree as an archive: a deterministic .tar.gz written for an export, and an upload read back
within limits (sized up before anything is unpacked, then its regular files taken)."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib
from collections.abc import Iterator

from .shapes import Malformed

MAX_TREE_BYTES = 192 * 1024 * 1024  # an uploaded tree, unpacked: headers, long names and PAX records count
MAX_MEMBERS = 100_000
MAX_HEADER_RECORD = 1024 * 1024  # one PAX or GNU long-name record (a name longer than any S3 key allows)
_BLOCK = 512
_CHUNK = 1024 * 1024
_PIECE = 64 * 1024
_LONG_RECORDS = (b"x", b"g", b"L", b"K")  # PAX extended/global headers, GNU long name/link
NOT_GZIP = "(upload): not a tar.gz archive (not gzip data, or damaged gzip data)"


def tarball(files: dict[str, bytes], mtime: int) -> bytes:
    """A deterministic .tar.gz of the tree (paths in order, one modification time)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(files[path]), mtime, 0o644
            archive.addfile(info, io.BytesIO(files[path]))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=mtime)


def _octal(field: bytes) -> int:
    """A tar header number: octal text, or base-256 when the first byte has its high bit set."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    return int(text or b"0", 8)


def _stream(data: bytes) -> Iterator[bytes]:
    """The tar stream of an upload, a bounded chunk at a time: gunzipped when gzip, else as it is."""
    if data[:2] != b"\x1f\x8b":
        for start in range(0, len(data), _CHUNK):
            yield data[start : start + _CHUNK]
        return
    decoder = zlib.decompressobj(wbits=31)
    for start in range(0, len(data), _PIECE):
        pending = data[start : start + _PIECE]
        while pending:
            if decoder.eof:  # another gzip member follows (or padding)
                if not pending.strip(b"\0"):
                    break
                decoder = zlib.decompressobj(wbits=31)
            out = decoder.decompress(pending, _CHUNK)
            pending = decoder.unconsumed_tail or (decoder.unused_data if decoder.eof else b"")
            if out:
                yield out
            while len(out) == _CHUNK and not pending:
                out = decoder.decompress(b"", _CHUNK)
                if out:
                    yield out
    if not decoder.eof:
        raise Malformed(["(upload): not a tar.gz archive (the gzip stream is cut short)"])


def measure(data: bytes) -> None:
    """Refuse, before anything is unpacked into memory, an archive whose tar stream — headers, PAX
    and GNU long-name records, contents and padding — exceeds MAX_TREE_BYTES, that holds more than
    MAX_MEMBERS members, or a long-name/PAX record beyond MAX_HEADER_RECORD. Reads the stream once,
    a chunk at a time, keeping only the header in hand."""
    buffer = bytearray()
    total = 0
    skip = 0  # bytes of member data still to pass over
    members = 0
    try:
        for chunk in _stream(data):
            total += len(chunk)
            if total > MAX_TREE_BYTES + 2 * _BLOCK:
                raise Malformed([f"(upload): the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB"])
            view = memoryview(chunk)
            if skip:
                passed = min(skip, len(view))
                skip -= passed
                view = view[passed:]
            buffer += view
            while len(buffer) >= _BLOCK and not skip:
                header = bytes(buffer[:_BLOCK])
                del buffer[:_BLOCK]
                if header == b"\0" * _BLOCK:
                    continue  # end-of-archive blocks (and any padding after them)
                size = _octal(header[124:136])
                if size < 0:
                    raise Malformed(["(upload): not a tar.gz archive (a negative member size)"])
                kind = header[156:157]
                if kind in _LONG_RECORDS and size > MAX_HEADER_RECORD:
                    raise Malformed(
                        [f"(upload): a tar header record of {size} bytes (at most {MAX_HEADER_RECORD} are read)"]
                    )
                if kind not in _LONG_RECORDS:
                    members += 1
                    if members > MAX_MEMBERS:
                        raise Malformed([f"(upload): more than {MAX_MEMBERS:,} members"])
                padded = -(-size // _BLOCK) * _BLOCK
                if total - len(buffer) + padded > MAX_TREE_BYTES + 2 * _BLOCK:
                    raise Malformed([f"(upload): the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB"])
                passed = min(padded, len(buffer))
                del buffer[:passed]
                skip = padded - passed
    except zlib.error:
        raise Malformed([NOT_GZIP]) from None
    except ValueError:
        raise Malformed(["(upload): not a tar.gz archive (an unreadable header)"]) from None


def member_name(name: str) -> str:
    """A member's name as the tree holds it: ``./x`` is ``x`` (as ``tar -C dir -czf t.tgz .`` writes
    names); ``""`` for the ``./`` entry itself."""
    while name.startswith("./"):
        name = name[2:]
    return "" if name == "." else name


def _outside(name: str) -> bool:
    """A name that is absolute or whose segments leave the tree (``..``, ``.``, empty)."""
    if name.startswith("/"):
        return True
    return any(segment in ("", ".", "..") for segment in name.rstrip("/").split("/"))


def untar(data: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz (or plain .tar), sized up first (measure); names normalised
    (member_name), and refused: a name leaving the tree, a link, a device or other special file, a
    name given twice."""
    measure(data)
    problems: list[str] = []
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                name = member_name(member.name)
                if not name:
                    continue
                if _outside(name):
                    problems.append(f"{member.name}: a path outside the tree")
                    continue
                if member.isdir():
                    continue
                if not member.isfile():
                    problems.append(f"{name}: not a regular file (links, devices and fifos are refused)")
                    continue
                if name in files:
                    problems.append(f"{name}: the tree holds this name twice")
                    continue
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError, zlib.error):
        # the library's own words (its exception text) are not the user's business
        raise Malformed(["(upload): not a tar.gz archive (it cannot be read as one)"]) from None
    if problems:
        raise Malformed(problems)
    return files
