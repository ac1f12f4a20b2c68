"""The scripted model (infra/local/memory_hub_local/scripted_llm.py) the tests and the bench relay
Converse to: its default answers (the formation extractor, a schema-built argument for any
other tool), its script (answers queued first in first out) and its counts — the model itself, in
process (its HTTP routes are exercised by tests/contract/test_converse.py)."""

from __future__ import annotations

import json

import pytest
from memory_hub_local.scripted_llm import (
    FACT_PREFIX,
    SAVE_MEMORIES,
    ScriptedModel,
    conversation_of,
    fact_of,
    from_schema,
)

SAVE_TOOL = {
    "type": "function",
    "function": {
        "name": SAVE_MEMORIES,
        "description": "Save memories",
        "parameters": {"type": "object", "properties": {"memories": {"type": "array"}}, "required": ["memories"]},
    },
}


def escaped(payload: dict) -> str:
    """The conversation as formation writes it: <, > and & inside strings as \\u escapes."""
    return json.dumps(payload).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def formation_request(messages: list[dict], memories: list[dict] | None = None, **extra) -> dict:
    conversation = {"messages": messages, "memories": memories or []}
    prompt = f"Form memories from this conversation.\n<conversation>\n{escaped(conversation)}\n</conversation>\nThanks."
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "You form memory."}, {"role": "user", "content": prompt}],
        "tools": [SAVE_TOOL],
        "tool_choice": {"type": "function", "function": {"name": SAVE_MEMORIES}},
        **extra,
    }


def message(mid: str, role: str, content: str, context: bool = False) -> dict:
    return {"id": mid, "role": role, "content": content, "time": "2026-01-01T00:00:00Z", "context": context}


def call_of(answer) -> tuple[str, dict | str]:
    (call,) = answer.body["choices"][0]["message"]["tool_calls"]
    arguments = call["function"]["arguments"]
    try:
        return call["function"]["name"], json.loads(arguments)
    except ValueError:
        return call["function"]["name"], arguments


def test_the_extractor_adds_one_episodic_fact_per_non_context_user_message():
    model = ScriptedModel()
    request = formation_request(
        [
            message("m0", "user", "an earlier message", context=True),
            message("m1", "user", "I like <green> tea & cake"),
            message("m2", "assistant", "Noted."),
            message("m3", "user", "x" * 300),
            message("m4", "user", "   "),
        ]
    )
    answer = model.complete(request)
    assert answer.status == 200
    assert answer.body["choices"][0]["finish_reason"] == "tool_calls"
    name, arguments = call_of(answer)
    assert name == SAVE_MEMORIES
    assert arguments == {
        "memories": [
            {
                "op": "add",
                "type": "episodic",
                "content": "The user said: I like <green> tea & cake",
                "source_message_ids": ["m1"],
            },
            {"op": "add", "type": "episodic", "content": FACT_PREFIX + "x" * 200, "source_message_ids": ["m3"]},
        ]
    }


def test_the_extractor_updates_an_offered_memory_that_holds_the_fact_already():
    request = formation_request(
        [message("m1", "user", "I live in Paris"), message("m2", "user", "I have a cat")],
        [
            {"alias": 3, "type": "episodic", "content": fact_of("I live in Paris")},
            {"alias": 4, "type": "x", "content": "y"},
        ],
    )
    _, arguments = call_of(ScriptedModel().complete(request))
    assert arguments["memories"] == [
        {"op": "update", "alias": 3, "content": "The user said: I live in Paris", "source_message_ids": ["m1"]},
        {"op": "add", "type": "episodic", "content": "The user said: I have a cat", "source_message_ids": ["m2"]},
    ]


def test_without_a_conversation_block_the_extractor_saves_nothing():
    request = formation_request([])
    request["messages"][-1]["content"] = "no conversation here"
    assert call_of(ScriptedModel().complete(request))[1] == {"memories": []}
    assert conversation_of("<conversation>\nnot json\n</conversation>") is None
    assert conversation_of("<conversation>{}</conversation>") is None, "the object stands between the lines"


def test_another_required_tool_gets_an_argument_built_from_its_schema():
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 30},
            "content": {"type": "string"},
            "record_ids": {"type": "array", "items": {"type": "string"}},
            "aliases": {"type": "array", "items": {"type": "integer"}},
            "kind": {"type": "string", "enum": ["daily", "work"]},
            "importance": {"type": "integer", "minimum": 2},
            "final": {"type": "boolean"},
            "extra": {"type": "string"},
            "optional": {"type": "string"},
        },
        "required": ["title", "content", "record_ids", "aliases", "kind", "importance", "final", "extra"],
    }
    records = {
        "records": [
            {"id": "r1", "alias": 1, "content": "Likes green tea in the morning"},
            {"id": "r2", "content": "Works in Lyon"},
        ]
    }
    prompt = f"Write the user's scene.\n<records>\n{json.dumps(records)}\n</records>"
    request = {
        "messages": [{"role": "user", "content": prompt}],
        "tools": [SAVE_TOOL, {"type": "function", "function": {"name": "write_scene", "parameters": schema}}],
        "tool_choice": {"type": "function", "function": {"name": "write_scene"}},
    }
    name, arguments = call_of(ScriptedModel().complete(request))
    assert name == "write_scene"
    assert arguments == {
        "title": "Scene: Likes green tea in the morning"[:30],
        "content": "- Likes green tea in the morning\n- Works in Lyon",
        "record_ids": ["r1", "r2"],
        "aliases": [1],
        "kind": "daily",
        "importance": 2,
        "final": True,
        "extra": "extra: Likes green tea in the morning",
    }
    persona = from_schema("update_persona", {"type": "object", "properties": {"persona": {"type": "string"}}}, request)
    assert persona == {"persona": "- Likes green tea in the morning\n- Works in Lyon"}
    plain = {"messages": [{"role": "user", "content": "one two three four five six seven"}]}
    assert from_schema("write_scene", {"required": ["title"], "properties": {"title": {}}}, plain) == {
        "title": "Scene: one two three four five six"
    }


def test_without_tools_the_default_answer_is_text():
    answer = ScriptedModel().complete({"messages": [{"role": "user", "content": "hello"}]})
    choice = answer.body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "OK."} and choice["finish_reason"] == "stop"


def test_the_script_is_consumed_first_in_first_out_then_the_default_answers():
    model = ScriptedModel()
    assert model.script({"tool_input": {"memories": [{"op": "add"}]}}, {"text": "plain"}) == 2
    assert (
        model.script({"tool_calls": [{"name": "a", "arguments": "not json"}, {"name": "b", "arguments": {"x": 1}}]})
        == 3
    )
    model.script(
        {"status": 429},
        {"status": 500, "body": {"error": {"message": "boom"}}},
        {"finish_reason": "length", "tool_input": {"memories": []}},
    )
    model.script({"delay_s": 0.25}, {"name": "write_scene", "tool_input": {"title": "t"}, "text": "and a note"})
    request = formation_request([message("m1", "user", "hello")])

    first = model.complete(request)
    assert call_of(first) == (SAVE_MEMORIES, {"memories": [{"op": "add"}]})
    second = model.complete(request).body["choices"][0]
    assert second["message"] == {"role": "assistant", "content": "plain"} and second["finish_reason"] == "stop"
    calls = model.complete(request).body["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "not json"),
        ("b", '{"x": 1}'),
    ]
    throttled = model.complete(request)
    assert throttled.status == 429 and throttled.body["error"]["code"] == 429
    failed = model.complete(request)
    assert (failed.status, failed.body) == (500, {"error": {"message": "boom"}})
    cut = model.complete(request)
    assert cut.body["choices"][0]["finish_reason"] == "length" and call_of(cut) == (SAVE_MEMORIES, {"memories": []})
    delayed = model.complete(request)
    assert delayed.delay_s == 0.25 and call_of(delayed)[1]["memories"][0]["source_message_ids"] == ["m1"]
    both = model.complete(request).body["choices"][0]["message"]
    assert both["content"] == "and a note" and call_of(model.complete(request))[0] == SAVE_MEMORIES
    assert both["tool_calls"][0]["function"] == {"name": "write_scene", "arguments": '{"title": "t"}'}
    model.script({"text": "never answered"})
    model.clear_script()
    assert model.complete(request).body["choices"][0]["message"].get("tool_calls")


def test_a_script_entry_must_be_an_object():
    with pytest.raises(ValueError):
        ScriptedModel().script(["not", "an", "object"])  # type: ignore[arg-type]


def test_requests_are_kept_in_order_and_usage_is_counted_approximately():
    model = ScriptedModel()
    small = {"messages": [{"role": "user", "content": "hi"}]}
    big = {"messages": [{"role": "user", "content": "x" * 4000}]}
    model.script({"status": 503})
    model.complete(small)
    answer = model.complete(big)
    model.complete(small)
    assert model.requests() == [small, big, small]
    usage = answer.body["usage"]
    assert usage["prompt_tokens"] == -(-(len(json.dumps(big["messages"])) + len("[]")) // 4) >= 1000
    assert usage["completion_tokens"] == 1 and usage["total_tokens"] == usage["prompt_tokens"] + 1
    stats = model.stats()
    assert stats["calls"] == 3 and stats["errors"] == 1 and stats["tool_calls"] == 0
    assert stats["total_tokens"] == stats["prompt_tokens"] + stats["completion_tokens"] > 1000
    model.clear_requests()
    model.reset_stats()
    assert model.requests() == [] and model.stats()["calls"] == 0
