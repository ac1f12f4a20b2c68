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
    tally = _Tally()
    try:
        for chunk in _stream(data):
            tally.add(chunk)
    except zlib.error:
        raise Malformed([NOT_GZIP]) from None
    except ValueError:
        raise Malformed(["(upload): not a tar.gz archive (an unreadable header)"]) from None


def _too_large() -> Malformed:
    return Malformed([f"(upload): the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB"])


class _Tally:
    """What ``measure`` has read so far: the stream's bytes, the unread header bytes in hand, the
    member data still to pass over and the members counted."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.total = 0
        self.skip = 0
        self.members = 0

    def add(self, chunk: bytes) -> None:
        """The next chunk of the tar stream: its member data passed over, its headers read."""
        self.total += len(chunk)
        if self.total > MAX_TREE_BYTES + 2 * _BLOCK:
            raise _too_large()
        view = memoryview(chunk)
        if self.skip:
            passed = min(self.skip, len(view))
            self.skip -= passed
            view = view[passed:]
        self.buffer += view
        while len(self.buffer) >= _BLOCK and not self.skip:
            header = bytes(self.buffer[:_BLOCK])
            del self.buffer[:_BLOCK]
            if header != b"\0" * _BLOCK:  # all zeros: end-of-archive blocks (and any padding after them)
                self._header(header)

    def _header(self, header: bytes) -> None:
        """One member's header: counted, and its data (padded to whole blocks) set to be passed over
        — refused at once when that data would take the stream past the limit."""
        size = _octal(header[124:136])
        if size < 0:
            raise Malformed(["(upload): not a tar.gz archive (a negative member size)"])
        self._count(header[156:157], size)
        padded = -(-size // _BLOCK) * _BLOCK
        if self.total - len(self.buffer) + padded > MAX_TREE_BYTES + 2 * _BLOCK:
            raise _too_large()
        passed = min(padded, len(self.buffer))
        del self.buffer[:passed]
        self.skip = padded - passed

    def _count(self, kind: bytes, size: int) -> None:
        """A long-name or PAX record is no member, but is read whole: it is held to MAX_HEADER_RECORD."""
        if kind in _LONG_RECORDS:
            if size > MAX_HEADER_RECORD:
                raise Malformed(
                    [f"(upload): a tar header record of {size} bytes (at most {MAX_HEADER_RECORD} are read)"]
                )
            return
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise Malformed([f"(upload): more than {MAX_MEMBERS:,} members"])


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
