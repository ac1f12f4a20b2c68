"""The Markdown reference of the API (``docs/API.md``), rendered from the OpenAPI document
(``spec.document()``): the conventions every route shares, the error statuses, then one section per
route (role, function, parameters, body and answer tables, errors), grouped by tag."""

from __future__ import annotations

import json
import re
from typing import Any

from ..template_file import ROOT
from .spec import IDEMPOTENCY_KEY, SCHEMAS, TAGS, document

REFERENCE_FILE = ROOT / "docs" / "API.md"

_ROLES = {"reader": "any key (reader, writer, admin)", "writer": "writer or admin", "admin": "admin"}

_CONVENTIONS = """\
## Conventions

**Calling.** Every route below but the public pages is `POST` with a JSON object as its body (at \
most BODY_MIB MiB, also after gzip decoding; send `Content-Encoding: gzip` to compress it) and these \
headers:

| header | value |
|---|---|
| `Authorization` | `Bearer <api-key>` (the scheme is case-insensitive) |
| `x-tdai-service-id` | the deployment's service id (`default` unless configured) |

A field's type is checked, never coerced: `"limit": "10"` is a 400, and so is `"limit": 10.0` (an \
integer is written without fraction or exponent). A key whose value is `null` \
counts as absent, except where a route says otherwise. Keys the route does not know are ignored, at \
every level; a body nested more than DEPTH levels deep (objects and lists, known keys or not) is a \
400 `Invalid JSON body`. Lengths in *chars* count Unicode code points; in *bytes*, UTF-8 bytes. A \
*control character* is one of Unicode category Cc (U+0000–U+001F, U+007F–U+009F).

**Answers.** A success is HTTP 200 with the envelope; the route's own fields are in `data`:

```json
{"code": 0, "message": "ok", "request_id": "req-0123456789abcdef", "data": {}}
```

An error is the HTTP status with the same shape: `code` equals the status, `message` says what is \
wrong, `data` may add details (a 409 tells the current version or the conflicts), and `retryable` \
says whether trying again can help:

```json
{"code": 400, "message": "limit: must be at most PAGE_LIMIT", "request_id": "req-…"}
```

A 400 lists each bad field as `<field>: <problem>`, separated by `; `; a field inside a list is \
named by its dotted path with zero-based indices (`messages.3.content`), and a rule across fields \
by `(root)`, beside the fields' own problems. `retryable` is `true` on 500 and 503 and on the \
409 of an `Idempotency-Key` that is still running, `false` on every other 409, and may be absent \
elsewhere. Every answer carries its \
request id in the `x-request-id` header too. A path the API does not have answers 404, and another \
method on a known path 405, both as error envelopes.

When several things are wrong, the first failing check answers, in this order: CHECKS.

**Isolation.** The data-plane routes (`/v3/conversation/*`, `/v3/atomic/*`, `/v3/scenario/*`, \
`/v3/core/*`) act inside one scope. Each isolation field comes from the body or, when the body has \
none, from its header:

| field | header | rule |
|---|---|---|
ISOLATION_ROWS

A missing or blank required field is a 422 naming the missing ones (`missing isolation fields: \
team_id, agent_id`); a malformed one is a 400. L0 and L1 are scoped by team, agent and user (and \
task when given; `session_id` narrows L0 reads only); L2 and L3 by team and agent, shared by the \
agent's users. The body tables below leave these five fields out.

**Times** in requests are RFC 3339 (`2026-01-01T08:00:00+08:00`, upper-case `T` and `Z`, 1–9 \
fraction digits); answers always use `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC. Time filters are \
inclusive. **Pagination:** `next_token` is opaque, present only when more results exist, and \
valid only with the same filters (`limit` may change); a bad one is a 400 `next_token: invalid` \
(named beside other bad fields when it is not one this deployment issued).

**Paths** (L2 `path`, `path_prefix`) are relative and `/`-separated, at most PATH_BYTES UTF-8 bytes, \
with no control character, no backslash, no leading `/`, no empty segment (one trailing `/` is \
allowed on a `path_prefix` and on an `rm` folder path), and no segment that starts with `.`; a \
file path ends in `.md`. Nothing is percent-decoded. A `path_prefix` is a plain string prefix \
(`a` matches `a/x.md` and `ab.md`); it may be empty.

**On AWS**, API Gateway may answer by itself with 429 (throttled), 502 or 504 (the function failed \
or timed out), in the envelope's shape with `retryable: true`; every route can get these, so the \
route sections below do not repeat them.
"""


def _conventions() -> str:
    """The conventions, with what the pipeline enforces read from it: the order of the checks
    (``CHECK_ORDER``), the isolation fields and their headers, the nesting limit, the body's size,
    the page limit, and the id and path rules (``domain.rules``)."""
    from memory_hub.domain.fields import PAGE_LIMIT
    from memory_hub.domain.rules import MAX_ID_CHARS, MAX_PATH_BYTES, TEAM_PATTERN
    from memory_hub.edge import conventions
    from memory_hub.settings import MAX_BODY_BYTES

    rows = []
    pattern = None
    for name, header in conventions.ISOLATION_HEADERS.items():
        need = "optional" if name in conventions.OPTIONAL_IDS else "required"
        if name in conventions.FREE_IDS:
            rule = f"1–{MAX_ID_CHARS} chars, no control characters"
        elif pattern is None:
            pattern, rule = name, f"`{TEAM_PATTERN}`"
        else:
            rule = f"same pattern as `{pattern}`"
        rows.append(f"| `{name}` | `{header}` | {need}; {_cell(rule)} |")
    checks = ", ".join(f"{what} ({status.replace('/', ', ')})" for status, what in conventions.CHECK_ORDER)
    return (
        _CONVENTIONS.replace("DEPTH", str(conventions.MAX_JSON_DEPTH))
        .replace("BODY_MIB", f"{MAX_BODY_BYTES / 2**20:g}")
        .replace("PAGE_LIMIT", str(PAGE_LIMIT))
        .replace("PATH_BYTES", str(MAX_PATH_BYTES))
        .replace("CHECKS", checks)
        .replace("ISOLATION_ROWS", "\n".join(rows))
    )


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


class _Reference:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.schemas: dict[str, Any] = spec["components"]["schemas"]
        from memory_hub.edge.schemas import common

        self.patterns = {
            common.TIME_PATTERN: "RFC 3339 time",
            common.NO_CONTROL_PATTERN: "no control characters",
            common.FILE_PATTERN: "a file path (see Paths)",
            common.PREFIX_PATTERN: "a path prefix (see Paths)",
            common.RM_PATTERN: "a file path or a folder path ending in `/` (see Paths)",
        }

    def model(self, ref: str) -> dict[str, Any]:
        found: dict[str, Any] = self.schemas[ref.removeprefix(SCHEMAS)]
        return found

    @staticmethod
    def _branches(schema: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The alternatives of a schema (anyOf), and whether null is one of them."""
        options = schema.get("anyOf", [schema])
        real = [o for o in options if o.get("type") != "null"]
        return real, len(real) < len(options)

    def type_of(self, schema: dict[str, Any]) -> str:
        real, nullable = self._branches(schema)
        names = [self._one_type(o) for o in real] or ["null"]
        text = " or ".join(dict.fromkeys(names))
        return f"{text} or null" if nullable and real else text

    def _one_type(self, schema: dict[str, Any]) -> str:
        if "$ref" in schema:
            return str(schema["$ref"]).removeprefix(SCHEMAS)
        if "allOf" in schema and len(schema["allOf"]) == 1:
            return self._one_type(schema["allOf"][0])
        if "const" in schema:
            return json.dumps(schema["const"], ensure_ascii=False)
        if "enum" in schema:
            return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        kind = schema.get("type")
        if kind == "array":
            return f"{self.type_of(schema.get('items', {}))}[]"
        if kind == "object":
            values = schema.get("additionalProperties")
            keys = schema.get("propertyNames", {}).get("enum")
            if isinstance(values, dict) and values:
                key = "/".join(keys) if keys else "string"
                return f"{{{key}: {self.type_of(values)}}}"
            return "object"
        return str(kind or "any")

    def rules(self, schema: dict[str, Any]) -> str:
        real, _ = self._branches(schema)
        found: list[str] = []
        for option in real:
            found += self._one_rules(option)
        if "default" in schema and schema["default"] is not None:
            found.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
        return "; ".join(dict.fromkeys(found))

    @staticmethod
    def _span(low: Any, high: Any, unit: str) -> str | None:
        suffix = f" {unit}" if unit else ""
        if low is not None and high is not None:
            return f"{low:,}–{high:,}{suffix}" if low != high else f"exactly {low:,}{suffix}"
        if high is not None:
            return f"≤ {high:,}{suffix}"
        if low is not None:
            return f"≥ {low:,}{suffix}"
        return None

    def _one_rules(self, schema: dict[str, Any]) -> list[str]:
        found = [
            self._span(schema.get("minLength"), schema.get("maxLength"), "chars"),
            self._span(schema.get("minItems"), schema.get("maxItems"), "items"),
            self._span(schema.get("minimum"), schema.get("maximum"), ""),
        ]
        rules = [f for f in found if f]
        if "pattern" in schema:
            pattern = schema["pattern"]
            rules.append(self.patterns.get(pattern) or f"pattern `{pattern}`")
        if schema.get("type") == "array":
            rules += [f"each {r}" for r in self._one_rules(schema.get("items", {}))]
        return [r.replace(".0", "") if r[:1].isdigit() or r[:1] in "≤≥" else r for r in rules]

    def refs_in(self, schema: Any) -> list[str]:
        """Object models named anywhere inside ``schema``, in order of first use."""
        found: list[str] = []
        if isinstance(schema, dict):
            if "$ref" in schema:
                found.append(schema["$ref"].removeprefix(SCHEMAS))
            for value in schema.values():
                found += self.refs_in(value)
        elif isinstance(schema, list):
            for value in schema:
                found += self.refs_in(value)
        return found

    def table(self, name: str, skip: tuple[str, ...] = (), answer: bool = False) -> list[str]:
        model = self.schemas[name]
        properties: dict[str, Any] = model.get("properties", {})
        required = set(model.get("required", []))
        rows = [(k, v) for k, v in properties.items() if k not in skip]
        if not rows:
            return ["No fields: send `{}`."] if not answer else ["No fields."]
        lines = []
        if answer:
            lines += ["| field | type | notes |", "|---|---|---|"]
        else:
            lines += ["| field | type | required | rules | notes |", "|---|---|---|---|---|"]
        for key, schema in rows:
            kind = _cell(self.type_of(schema))
            note = _cell(schema.get("description", ""))
            if answer:
                always = "" if key in required else "only when set"
                lines.append(f"| `{key}` | {kind} | {'; '.join(x for x in (always, note) if x)} |")
            else:
                need = "yes" if key in required else "no"
                lines.append(f"| `{key}` | {kind} | {need} | {_cell(self.rules(schema))} | {note} |")
        return lines

    def nested(self, roots: list[str], seen: set[str], answer: bool) -> list[str]:
        lines: list[str] = []
        queue = [r for root in roots for r in self.refs_in(self.schemas[root])]
        while queue:
            name = queue.pop(0)
            if name in seen or self.schemas[name].get("type") != "object":
                continue
            seen.add(name)
            lines += ["", f"`{name}`:", "", *self.table(name, answer=answer)]
            queue += self.refs_in(self.schemas[name])
        return lines

    def operation(self, path: str, method: str, op: dict[str, Any]) -> list[str]:
        from memory_hub.edge.conventions import ISOLATION_HEADERS

        title = f"{method.upper()} {path}"
        lines = [f"### `{title}`", "", f"{op.get('summary', '')}.", ""]
        if method == "get":
            content = op["responses"]["200"]["content"]
            kind = next(iter(content))
            return [*lines, f"No auth, no envelope: answers `{kind}`.", ""]
        role, function = op["x-memory-hub-role"], op["x-memory-hub-function"]
        facts = [f"Role: {_ROLES[role]}", f"function: `{function}`"]
        if op["x-memory-hub-isolated"]:
            facts.append("isolated (team, agent, user required)")
        params = op.get("parameters", [])
        if any(p["name"] == IDEMPOTENCY_KEY for p in params):
            facts.append("accepts `Idempotency-Key`")
        lines += ["; ".join(facts) + ".", ""]
        extra = [p for p in params if not p["name"].startswith("x-tdai-")]
        if extra:
            lines += ["| parameter | in | type | required | rules | notes |", "|---|---|---|---|---|---|"]
            for p in extra:
                need = "yes" if p.get("required") else "no"
                schema = p["schema"]
                lines.append(
                    f"| `{p['name']}` | {p['in']} | {_cell(self.type_of(schema))} | {need} | "
                    f"{_cell(self.rules(schema))} | {_cell(p.get('description', ''))} |"
                )
            lines.append("")
        body_ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        body = body_ref.removeprefix(SCHEMAS)
        skip = tuple(ISOLATION_HEADERS) if op["x-memory-hub-isolated"] else ()
        lines += [f"**Body** (`{body}`):", "", *self.table(body, skip=skip)]
        lines += self.nested([body], {body}, answer=False)
        lines += [""]
        ok = op["responses"]["200"]
        answer = ok["content"]["application/json"]["schema"]["$ref"].removeprefix(SCHEMAS)
        data = self.schemas[answer].get("properties", {}).get("data")
        if data is None:  # not the envelope: the answer itself
            lines += [f"**Answer** (`{answer}`, not the envelope): {ok['description']}", ""]
            lines += self.table(answer, answer=True)
            roots = [answer]
        else:
            roots = [r.removeprefix(SCHEMAS) for r in self.refs_in(data)]
            names = " or ".join(f"`{r}`" for r in roots)
            lines += [f"**Answer** `data` ({names}):", ""]
            for i, root in enumerate(roots):
                description = self.schemas[root].get("description")
                if len(roots) > 1:
                    lines += [f"{'' if i == 0 else chr(10)}`{root}`: {description or ''}", ""]
                lines += self.table(root, answer=True)
        lines += self.nested(roots, set(roots), answer=True)
        statuses = [s for s in op["responses"] if s != "200" and int(s) not in (429, 502, 504)]
        lines += ["", "**Errors**:", ""]
        for status in statuses:
            response = op["responses"][status]
            if "$ref" in response:
                response = self.spec["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
            lines.append(f"- {status}: {response['description']}")
        return [*lines, ""]

    def render(self) -> str:
        ops = [
            (path, method, op)
            for path, item in self.spec["paths"].items()
            for method, op in item.items()
            if method in ("get", "post")
        ]
        tag_order = {name: i for i, name in enumerate(TAGS)}
        ops.sort(key=lambda o: (tag_order.get(o[2]["tags"][0], len(TAGS)), o[0]))
        lines = [
            "# Memory Hub API reference",
            "",
            "<!-- Generated by `memory-hub openapi` (memory_hub_tools.openapi.reference) from the models behind",
            "     /openapi.json. Do not edit by hand: change the code and run `memory-hub openapi`. -->",
            "",
            "This page describes every route of the Memory Hub HTTP API: who may call it, what it takes and",
            "what it answers. It is generated from the same request and response models as the OpenAPI",
            "document the service serves at `GET /openapi.json` (browsable at `GET /docs`), so the two always",
            "agree.",
            "",
            _conventions(),
            "### Error statuses",
            "",
            "| status | when |",
            "|---|---|",
        ]
        from memory_hub.edge.error_docs import ERRORS, GATEWAY_ERRORS

        lines += [f"| {s} | {_cell(t)} |" for s, t in {**ERRORS, **GATEWAY_ERRORS}.items()]
        lines += ["", "## Routes", "", "| route | role | summary |", "|---|---|---|"]
        for path, method, op in ops:
            title = f"{method.upper()} {path}"
            role = op.get("x-memory-hub-role", "none (public)")
            lines.append(f"| [`{title}`](#{_anchor(title)}) | {role} | {_cell(op.get('summary', ''))} |")
        current = None
        for path, method, op in ops:
            tag = op["tags"][0]
            if tag != current:
                current = tag
                lines += (
                    ["", f"## {tag}", "", TAGS.get(tag, ""), ""]
                    if lines[-1]
                    else [f"## {tag}", "", TAGS.get(tag, ""), ""]
                )
            lines += self.operation(path, method, op)
        return "\n".join(lines).rstrip("\n") + "\n"


def reference() -> str:
    """The API reference in Markdown (``docs/API.md``), rendered from the OpenAPI document."""
    return _Reference(document()).render()
