"""Where items are kept: every DynamoDB key (S3 object keys: ``bucket``).

Ids chosen by callers (``user_id``, ``session_id``, ``task_id``: up to 1,024 UTF-8 bytes each) and
terms of content appear in keys only as fixed-length digests, so every key stays within AWS's
limits at every valid input (partition keys ≤ 2,048 bytes, sort keys ≤ 1,024 bytes, S3 keys ≤
1,024 bytes); the original values are kept as attributes. ``team_id`` and ``agent_id`` (≤ 64 of
``[A-Za-z0-9._@-]``) appear as they are.

ItemsTable, one partition per (layer, team + agent, content epoch, user):

    pk                              sk                      lsi1 (by-time)   lsi2 (by-session)   lsi3 (by-term)
    L0#<team>:<agent>#<epoch>#<u>   m␟<time>#<msg id>       —                <s>␟<time>#<id>     —
    L0#…                            msg-…                   <time>#<id>      <s>␟<time>#<id>     —
    L0#…                            t␟<t>␟3<impact>␟<msg id> (a message's posting, keyed by term: in no index)
    L1#<team>:<agent>#<epoch>#<u>   atom-…                  <time>#<id>      —                   —
    L1#…                            nk␟<natural key>        —                —                   —
    L1#…                            p␟<atom id>␟<t>         —                —                   <t>␟2<impact>␟<atom id>
    L0#… / L1#…                     df␟<t>                  (a term's document frequency: in no index)
    L1#…                            c␟<msg id>␟<atom id>    (provenance: that record cites that message)
    L0#…                            fs / fp / fr␟<run>      (formation: user state, a stored answer, a run done)
    L0#…                            fu␟<s>␟<k>␟<msg id>     (formation: a message to form; <k>: task digest or -)
    L1#…                            ff␟<f> / fl␟<atom>␟<f>  (formed files of the user; the records they came from)
    L0#… / L1#…                     wv␟<msg or atom id>     (its vector waiting for a batched PutVectors)
    C#<team>:<agent>#<epoch>        L0␟<u> / L1␟<u> / S␟<u>␟<s>   (exact counters: items, term totals)
    PURGE                           <team>:<agent>#<epoch>  (an epoch whose erasure is unfinished)
    CLEANUP                         lease / cursor
    JOB                             <job id>                (export and import jobs)

``<u>``, ``<s>``: 32-hex digests of user and session id; ``<t>``: 20-hex digest of a search term;
``␟`` is U+001F, which no id may contain. ``<time>`` is a fixed-width millisecond count, so string
order is time order. A message is kept under its time when its id carries it (every id issued
since ids did): the table's order is then time order, and ``by-time`` holds only the messages kept
under their id (``message_sk``). Search postings (``t␟…``, ``p␟…``: ``postings``) live beside the items they
index: erasing a user's partitions erases their index too. (Messages indexed before their postings
were keyed by term hold ``p␟<msg id>␟<t>`` postings until the re-index rewrites them.)

A memory's files are in S3, one prefix per memory: see ``bucket``.
"""

from __future__ import annotations

import hashlib

from ..clock import TIME_OFFSET_MS, id_time

SEP = "\x1f"
ID_DIGEST = 32
TERM_DIGEST = 20
MESSAGES = f"m{SEP}"  # the sort keys of messages keyed by their time
LEGACY_MESSAGES = "msg-"  # the sort keys of messages keyed by their id alone

PURGE_PK = "PURGE"
CLEANUP_PK = "CLEANUP"
JOB_PK = "JOB"


def digest(value: str, length: int = ID_DIGEST) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:length]


def term_digest(term: str) -> str:
    return digest(term, TERM_DIGEST)


def pair(team_id: str, agent_id: str) -> str:
    return f"{team_id}:{agent_id}"


def memory_part(team_id: str, agent_id: str, epoch: int) -> str:
    return f"{pair(team_id, agent_id)}#{int(epoch)}"


def item_pk(layer: str, team_id: str, agent_id: str, epoch: int, user_id: str) -> str:
    """The partition of one user's L0 or L1 items (``layer`` is ``L0`` or ``L1``)."""
    return f"{layer}#{memory_part(team_id, agent_id, epoch)}#{digest(user_id)}"


def user_digest_of(pk: str) -> str:
    """The digest of the user an ``item_pk`` partition belongs to."""
    return pk.rsplit("#", 1)[1]


def layer_of(pk: str) -> str:
    """The layer of an ``item_pk`` partition (``L0`` or ``L1``)."""
    return pk.split("#", 1)[0]


def counter_pk(team_id: str, agent_id: str, epoch: int) -> str:
    return f"C#{memory_part(team_id, agent_id, epoch)}"


def user_counter_sk(layer: str, user_id: str) -> str:
    return f"{layer}{SEP}{digest(user_id)}"


SESSION_COUNTERS = f"S{SEP}"  # the key prefix of the counters of before, one a session


def session_counter_sk(user_id: str, session_id: str) -> str:
    """A session's counter, as epochs written before 2026-12-05 hold it (no longer written or read:
    see ``counters``)."""
    return f"{SESSION_COUNTERS}{digest(user_id)}{SEP}{digest(session_id)}"


def time_key(ms: int, item_id: str) -> str:
    """Sortable time + id: string order is (time, id) order."""
    return f"{ms + TIME_OFFSET_MS:015d}#{item_id}"


def time_bound(ms: int | None, *, upper: bool) -> str:
    """The lowest (or highest) time key at ``ms``; None is open-ended."""
    if ms is None:
        return "~" if upper else "0"  # every time key starts with a digit
    return f"{ms + TIME_OFFSET_MS:015d}#" + ("~" if upper else "")


def message_sk(message_id: str) -> str:
    """Where a message is kept: by its time (``m␟<time>#<id>``) when its id carries that time
    (``clock.message_id``), so the table's own order is time order and the ``by-time`` index needs
    no entry of it; else (ids issued before, derived from an import's foreign ids) by its id, with a
    ``by-time`` entry."""
    at = id_time(message_id)
    return message_id if at is None else MESSAGES + time_key(at, message_id)


def is_message_sk(sk: str) -> bool:
    return sk.startswith(MESSAGES) or sk.startswith(LEGACY_MESSAGES)


def message_time_bounds(start: int | None, end: int | None) -> tuple[str, str]:
    """The sort-key range of the messages keyed by time between ``start`` and ``end`` (inclusive)."""
    return MESSAGES + time_bound(start, upper=False), MESSAGES + time_bound(end, upper=True)


def session_key(session_id: str, ms: int, item_id: str) -> str:
    return f"{digest(session_id)}{SEP}{time_key(ms, item_id)}"


def session_bounds(session_id: str, start: int | None, end: int | None) -> tuple[str, str]:
    prefix = f"{digest(session_id)}{SEP}"
    return prefix + time_bound(start, upper=False), prefix + time_bound(end, upper=True)


def natural_key_sk(natural_key: str) -> str:
    return f"nk{SEP}{natural_key}"


def citation_sk(message_id: str, atom_id: str) -> str:
    return f"c{SEP}{message_id}{SEP}{atom_id}"


def citations_of(message_id: str) -> str:
    """Sort-key prefix of every citation of one message."""
    return f"c{SEP}{message_id}{SEP}"


CITATIONS = f"c{SEP}"

# Formation (the user's L0 partition: state and queue; their L1 partition: formed files' lineage).
FORMATION = "f"  # every formation item's sort key starts with it (a user's erasure drops them all)
FORMATION_STATE = "fs"
PENDING_RUN = "fp"
NO_TASK = "-"


def unformed_prefix(session_id: str | None = None, task_id: str | None = None, *, any_task: bool = False) -> str:
    """Sort-key prefix of a user's unformed messages: all of them, a session's, or one batch's
    (session and task; ``any_task`` leaves the task open)."""
    if session_id is None:
        return f"fu{SEP}"
    if any_task:
        return f"fu{SEP}{digest(session_id)}{SEP}"
    return _batch_prefix((digest(session_id), digest(task_id) if task_id is not None else NO_TASK))


def unformed_sk(session_id: str, task_id: str | None, message_id: str) -> str:
    return unformed_prefix(session_id, task_id) + message_id


def unformed_batch_sk(batch: tuple[str, str], message_id: str) -> str:
    """An unformed message's sort key from its batch as read back (session digest, task digest or
    ``NO_TASK``: what a key holds between the prefix and the id)."""
    return _batch_prefix(batch) + message_id


def _batch_prefix(batch: tuple[str, str]) -> str:
    session, task = batch
    return f"fu{SEP}{session}{SEP}{task}{SEP}"


def formed_run_sk(run_id: str) -> str:
    return f"fr{SEP}{run_id}"


FORMED_RUNS = f"fr{SEP}"


def formed_file_sk(file_id: str) -> str:
    return f"ff{SEP}{file_id}"


FORMED_FILES = f"ff{SEP}"


def lineage_sk(atom_id: str, file_id: str) -> str:
    return f"fl{SEP}{atom_id}{SEP}{file_id}"


def lineage_of(atom_id: str) -> str:
    return f"fl{SEP}{atom_id}{SEP}"


WAITING_VECTORS = f"wv{SEP}"  # a vector waiting for its batched PutVectors, in its item's partition


def waiting_vector_sk(item_id: str) -> str:
    return f"{WAITING_VECTORS}{item_id}"


def posting_sk(item_id: str, term: str) -> str:
    return f"p{SEP}{item_id}{SEP}{term}"


def postings_of(item_id: str) -> str:
    """Sort-key prefix of every posting of one item."""
    return f"p{SEP}{item_id}{SEP}"


def posting_term_key(term: str, item_id: str) -> str:
    return f"{term}{SEP}{item_id}"


def term_prefix(term: str) -> str:
    return f"{term}{SEP}"


def scene_scope(team_id: str, agent_id: str) -> str:
    """Partition of the scene index: one per (team, agent); each entry names its content epoch, so
    a write can read its entry before it knows the epoch (in the same round trip as the asset)."""
    return pair(team_id, agent_id)


def purge_sk(team_id: str, agent_id: str, epoch: int) -> str:
    return memory_part(team_id, agent_id, epoch)


def audit_pair_pk(team_id: str, agent_id: str) -> str:
    """Audit events belong to the (team, agent) pair that caused them, never to a memory_id string."""
    return f"P#{pair(team_id, agent_id)}"


def audit_key_pk(team_id: str) -> str:
    return f"K#{team_id}"


AUDIT_ALL = "all"  # the all-teams view's partition (``by-all``) as events before 2026-12-05 hold it
AUDIT_ALL_SHARDS = 16  # the view's partitions since


def audit_all_shard(event_id: str) -> str:
    """The all-teams view's partition of a new event: one of ``AUDIT_ALL_SHARDS`` by a digest of its
    id. Every audited write of the stack lands in that view, and one partition of an index takes
    about 1,000 writes a second — with time-ordered ids always at its end, where DynamoDB cannot
    split it — so the view is spread over several, which a read of it queries together."""
    return _audit_all(int(digest(event_id)[:8], 16) % AUDIT_ALL_SHARDS)


def _audit_all(shard: int) -> str:
    return f"{AUDIT_ALL}{SEP}{shard}"


def audit_all_partitions() -> list[str]:
    """Every partition of the all-teams view, the one of before first."""
    return [AUDIT_ALL] + [_audit_all(n) for n in range(AUDIT_ALL_SHARDS)]


def fits_key(value: str, limit: int = 1024) -> bool:
    """Whether ``value`` may appear in a key at all (an id longer than any we issue names nothing)."""
    return len(value.encode("utf-8")) <= limit
