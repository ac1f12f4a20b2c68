"""What the use cases answer: one pydantic model per answer, returned by the domain, serialized by
the edge into the envelope's ``data`` and read by the OpenAPI generator for each route's 200.

Rules of these models (``Answer``):

- a field typed ``X | None`` with no default is always sent, ``null`` when unset;
- a field declared with ``absent(...)`` is left out of the answer when it is None (and documented
  as X, not required): ``next_token``, ``purge_pending``, a job's ``url``, …;
- patterns (``Stamp``, ids) are documentation: the answers are built by the service in those
  formats and are not re-checked at run time — an imported persona or file keeps the times it came
  with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field


class Answer(BaseModel):
    model_config = ConfigDict(defer_build=True)
    # per class, from its fields: those holding answers (a model, or a list of them), those left out when None
    _nested: ClassVar[tuple[str, ...]] = ()
    _absent: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields.items()
        cls._nested = tuple(name for name, field in fields if _holds_answers(field.annotation))
        cls._absent = tuple(name for name, field in fields if field.exclude_if is not None)

    def wire(self) -> dict[str, Any]:
        """The answer as JSON-ready Python values (what the envelope's ``data`` holds): what
        ``model_dump()`` gives, in a fraction of its time on a page of 100 items (the values are
        already plain: the fields' types are str, int, float, bool, None, lists and dicts of them,
        or answers, which are converted in turn)."""
        out = dict(self.__dict__)
        for name in self._nested:
            value = out[name]
            if isinstance(value, list):
                out[name] = [item.wire() for item in value]
            elif value is not None:
                out[name] = value.wire()
        for name in self._absent:
            if out[name] is None:
                del out[name]
        return out


def _holds_answers(annotation: Any) -> bool:
    """Whether a field's type mentions an answer model (``X``, ``list[X]``, ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, Answer):
        return True
    return any(_holds_answers(arg) for arg in get_args(annotation))


def _is_none(value: object) -> bool:
    return value is None


def _present_only(schema: dict[str, Any]) -> None:
    """Document a field left out when None as X, not as X | null (never sent as null)."""
    options = [o for o in schema.pop("anyOf", []) if o.get("type") != "null"]
    schema.pop("default", None)
    schema.update(options[0] if len(options) == 1 else {"anyOf": options})


_PRESENT_ONLY: Any = _present_only


# Lambda answers a synchronous invocation with at most 6 MB (6,291,456 bytes): the API Gateway proxy
# response, the answer's JSON a string inside it. A page of items stops short of that, leaving room
# for the rest of the answer and the headers; a route whose page is cut says so by its next_token.
# Pages that can pass it at the contract's limits: scenario/ls (1,000 entries, each twice, with
# 1,024-character summaries) and memory/list (100 assets of 100 ACL entries and bindings). A page
# of 100 records at theirs is ~6.1 MB, and of messages ~3.4 MB: those routes are left whole.
ANSWER_BUDGET = 5_800_000


def wire_bytes(answer: Answer) -> int:
    """Bytes ``answer`` takes in the function's response: its JSON in UTF-8 (as the Lambda runtime
    writes non-ASCII), inside the proxy response's body string (each quote and backslash escaped
    once more)."""
    text = json.dumps(answer.wire(), ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8")) + text.count('"') + text.count("\\")


def fitting(answers: Sequence[Answer], copies: int = 1, budget: int | None = None) -> int:
    """How many of ``answers``, in order, one response carries within the budget (``copies``: each
    is in the answer that many times, as ``scenario/ls``'s entries and scenes) — at least one."""
    room = ANSWER_BUDGET if budget is None else budget
    used = 0
    for n, answer in enumerate(answers):
        used += copies * wire_bytes(answer)
        if used > room and n > 0:
            return n
    return len(answers)


def absent(description: str | None = None) -> Any:
    """A field left out of the answer when it is None (never sent as null)."""
    return Field(None, description=description, exclude_if=_is_none, json_schema_extra=_PRESENT_ONLY)


def pattern(regex: str, description: str | None = None) -> Any:
    """A documented pattern (not enforced at run time)."""
    return Field(description=description, json_schema_extra={"pattern": regex})


REQUEST_ID = r"^req-[0-9a-f]{16}$"
# Times the service writes: YYYY-MM-DDTHH:MM:SS.mmmZ in UTC, so string order is time order.
Stamp = Annotated[str, pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$")]
# L2 times are read back from the file's META block (which the service writes in the same format).
MetaTime = Annotated[Stamp, Field(description="from the file's META block")]
MessageId = Annotated[str, pattern(r"^msg-", "msg-…, time-ordered")]
RecordId = Annotated[str, pattern(r"^atom-", "atom-…, time-ordered")]
AuditIds = Annotated[list[str], Field(description="ids of the audit events this change recorded (no content)")]
Role = Literal["user", "assistant"]
KeyRole = Literal["reader", "writer", "admin"]
AuditAction = Literal[
    "clear",
    "delete",
    "user_memory_delete",
    "memory_delete",
    "memory_update",
    "scenario_write",
    "scenario_rm",
    "core_write",
    "atomic_update",
    "retention_cleanup",
    "key_create",
    "key_revoke",
    "export",
    "import",
    "formation",
]
AuditLayer = Literal["L0", "L1", "L2", "L3", "asset", "key"]
Visibility = Literal["private", "team", "public"]
FormationLayers = Literal["off", "records", "all"]
Permission = Literal["read", "write", "admin"]

# ---------------------------------------------------------------- L2 scenario files


class ScenarioEntry(Answer):
    path: str
    summary: str | None = Field(description="null when unset")
    version: int
    size: int = Field(description="bytes of the stored file (META block included)")
    created_at: MetaTime
    updated_at: MetaTime
    team_id: str
    agent_id: str


class ScenarioList(Answer):
    entries: list[ScenarioEntry] = Field(description="files only, in ascending order of the path's UTF-8 bytes")
    scenes: list[ScenarioEntry] = Field(description="the same list as entries (SDK compatibility)")
    total: int = Field(description="all files under the prefix, not only this page")
    next_token: str | None = absent(
        "present only when more files follow: past `limit`, or sooner when the page's entries would pass"
        " Lambda's 6 MB answer (long summaries)"
    )


class ScenarioFile(Answer):
    path: str
    content: str | None = Field(description="raw, META block included; null when missing")
    version: int | None = Field(description="null when missing")
    summary: str | None
    created_at: MetaTime | None
    updated_at: MetaTime | None
    team_id: str
    agent_id: str


class ScenarioWritten(Answer):
    path: str
    version: int = Field(description="1 for a new file, then +1 per write")
    created: bool = Field(description="true when this write created the file (version 1)")
    updated_at: Stamp
    created_at: Stamp
    team_id: str
    agent_id: str


class ScenarioRemoved(Answer):
    success: Literal[True]
    deleted: int = Field(description="files removed (0 when nothing was there)")
    audit_ids: AuditIds


class ScenarioCounted(Answer):
    count: int
    total: int = Field(description="the same number as count")


# ---------------------------------------------------------------- L3 persona


class Persona(Answer):
    content: str | None = Field(description="exactly as written; null when there is no persona")
    version: int | None
    created_at: Stamp | None
    updated_at: Stamp | None
    team_id: str
    agent_id: str


class PersonaWritten(Answer):
    version: int = Field(description="1 for the first write, then +1 per write")
    updated_at: Stamp
    created_at: Stamp
    team_id: str
    agent_id: str


class PersonaCount(Answer):
    total: Literal[0, 1] = Field(description="1 if a persona exists (even empty)")
    team_id: str
    agent_id: str


# ---------------------------------------------------------------- L0 conversation

SCORE = (
    "relevance, higher is better, on reciprocal-rank fusion's scale (at most 2/61) in every mode: BM25 "
    "relative to the query's best plus half the cosine similarity (hybrid); either part alone (keyword, "
    "semantic)"
)
TURN_SCORE = (
    SCORE + "; in hybrid a turn also gains half of what the found turns said just before and after it in its "
    "session agree on (the lesser of their relative BM25 and cosine), the better of the two"
)
Mode = Literal["hybrid", "keyword", "semantic"]
ModeUsed = Annotated[
    Mode,
    Field(description="what ran: keyword when the query could not be embedded or the deployment has no embeddings"),
]


class Added(Answer):
    accepted_ids: list[MessageId] = Field(description="one id per message, in request order")
    accepted_versions: list[Literal["v1"]] = Field(description='"v1" for each message')
    total_count: int = Field(description="the number of messages accepted")


class MessageItem(Answer):
    id: MessageId
    session_id: str
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    role: Role
    content: str
    timestamp: Stamp = Field(description="the message's own time")


class Messages(Answer):
    messages: list[MessageItem] = Field(description="newest timestamp first (ties: larger id first)")
    total: int = Field(description="all messages matching the filters")


class MessageHit(Answer):
    id: MessageId
    session_id: str
    role: Role
    content: str
    timestamp: Stamp
    score: float = Field(description=TURN_SCORE)


class MessageHits(Answer):
    messages: list[MessageHit] = Field(description="best first")
    mode_used: ModeUsed


class Total(Answer):
    total: int


class MessagesDeleted(Answer):
    deleted_count: int = Field(description="messages removed, each counted once")
    deleted_ids: list[str] = Field(description="the named message ids that were removed, in request order")
    deleted_session_ids: list[str] = Field(description="the named sessions that removed at least one message")
    not_found_ids: list[str] = Field(description="named ids (message or session) that removed nothing")
    records_deleted: int = Field(
        description="distinct L1 records erased because they cited an erased message "
        "(a record never outlives its sources)"
    )
    files_deleted: int = Field(
        description="formed files removed because a record they came from was erased, and the memory's exports"
        " erased with what was deleted"
    )
    audit_ids: AuditIds


# ---------------------------------------------------------------- L1 atomic records


class RecordItem(Answer):
    id: RecordId
    type: str
    content: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    version: int = Field(description="1 when added, +1 per update")
    reinforced_count: int = Field(description="how many adds brought this same record (1 when new)")
    team_id: str
    agent_id: str
    user_id: str
    task_id: str | None
    session_id: str | None
    source_message_ids: list[MessageId] = Field(
        description="the messages it was drawn from (the newest 100; [] when none); erasing one erases the record"
    )
    formed: bool = Field(description="true for a record formation wrote (until a client's add or update touches it)")
    created_at: Stamp
    updated_at: Stamp


class RecordHit(RecordItem):
    score: float = Field(description=SCORE)


class RecordAdded(Answer):
    id: RecordId
    version: int = Field(description="1 when new; unchanged when reinforced")
    created: bool = Field(description="false: the same content, type and background was there and is reinforced")
    reinforced_count: int


class Records(Answer):
    items: list[RecordItem] = Field(description="newest updated_at first (ties: larger id first)")
    total: int = Field(description="all records matching the filters")


class RecordHits(Answer):
    items: list[RecordHit] = Field(description="best first")
    mode_used: ModeUsed


class RecordUpdated(Answer):
    id: RecordId
    version: str = pattern(r"^v[0-9]+$", '"v<N>": the new version')
    updated_at: Stamp


class RecordsDeleted(Answer):
    deleted_count: int
    deleted_ids: list[str] = Field(description="in request order (after trimming and de-duplication)")
    not_found_ids: list[str] = Field(description="unknown, already gone, or outside the scope")
    files_deleted: int = Field(
        description="formed files removed because they came from an erased record, and the memory's exports"
        " erased with what was deleted"
    )
    audit_ids: AuditIds


# ---------------------------------------------------------------- formation

FormationState = Literal["idle", "queued", "running", "paused"]
ErrorKind = Literal["model_unavailable", "access_denied", "bad_answer", "timeout", "other"]


class FormationError(Answer):
    at: Stamp
    kind: ErrorKind
    message: str = Field(description="a fixed message per kind (never the model's or the request's text)")


class FormationStatus(Answer):
    enabled: bool = Field(description="the deployment forms memory and the asset is not off (not health)")
    layers: FormationLayers = Field(description="the asset's formation setting (records for a pair without an asset)")
    model: str | None = Field(description="the model formation calls; null when off")
    state: FormationState = Field(
        description="idle (nothing due; fewer than a batch pending, or the idle timer counting), queued (a run is "
        "due), running, paused (after the third failure in a row; formation/run resumes)"
    )
    pending_messages: int = Field(description="this user's unformed messages (both roles), narrowed by session_id")
    last_run_at: Stamp | None
    last_formed_message_id: MessageId | None = Field(description="the newest message formed; null once erased")
    records_formed: int = Field(description="this user's formed records that exist now")
    dropped: int = Field(description="model entries refused since the last clear")
    last_error: FormationError | None


class FormationRun(Answer):
    state: FormationState
    pending_messages: int
