"""Amazon Bedrock's Converse on the local stack (infra/local/memory_hub_local/aws/converse.py): moto
alone has none; the emulated AWS side serves it for the template's formation model by relaying to an
OpenAI-compatible server — here the scripted one (memory_hub_local.scripted_llm) — translating both
ways, checking the request as Bedrock does, mapping the server's failures to Bedrock's errors, and
holding each function to its IAM policy as the stack's parameters make it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from memory_hub_local.aws import converse, vector_calls
from memory_hub_local.aws.shapes import Refusal
from memory_hub_local.identity import SEED_VARIABLE, Credentials
from memory_hub_local.scripted_llm import SAVE_MEMORIES, ScriptedClient, ScriptedServer, fact_of, serve, stop

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
MODEL = "amazon.nova-lite-v1:0"
SEED = bytes(range(32))
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=30)
SAVE_SPEC = {
    "toolSpec": {
        "name": SAVE_MEMORIES,
        "description": "Save the memories formed from the conversation.",
        "inputSchema": {
            "json": {"type": "object", "properties": {"memories": {"type": "array"}}, "required": ["memories"]}
        },
    }
}
HELLO = [{"role": "user", "content": [{"text": "hello"}]}]


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    server, _ = serve()
    yield server
    stop(server)


@pytest.fixture
def model(scripted: ScriptedServer):
    """The scripted model with nothing queued, received or counted yet."""
    scripted.model.clear_script()
    scripted.model.clear_requests()
    scripted.model.reset_stats()
    return scripted.model


@pytest.fixture
def relay(scripted: ScriptedServer) -> converse.Relay:
    return converse.Relay(scripted.url, "tiny-model", "secret-key", timeout_s=10)


def call(relay: converse.Relay, **request: Any) -> dict[str, Any]:
    """One Converse relayed (as the emulated AWS side answers it): the response, or raises Refusal."""
    status, headers, body = converse.converse(MODEL, json.dumps(request).encode(), {MODEL}, REGION, relay)
    assert status == 200 and headers["Content-Type"] == "application/json"
    answer: dict[str, Any] = json.loads(body)
    return answer


def refusal(relay: converse.Relay, **request: Any) -> tuple[int, str, dict[str, Any]]:
    with pytest.raises(Refusal) as refused:
        call(relay, **request)
    code = refused.value.headers["x-amzn-ErrorType"].split(":", 1)[0]
    return refused.value.status, code, json.loads(refused.value.body)


def tool_config(choice: dict[str, Any] | None = None, *extra: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {"tools": [SAVE_SPEC, *extra]}
    if choice is not None:
        config["toolChoice"] = choice
    return config


# ---------------------------------------------------------------- moto alone, and the side that serves it


def bedrock_client(url: str, key: str = "x", secret: str = "x", token: str | None = None) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=NO_RETRIES,
    )


def test_moto_alone_has_no_converse():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        with pytest.raises(ClientError) as failed:
            bedrock_client(f"http://{host}:{port}").converse(modelId=MODEL, messages=HELLO)
    finally:
        server.stop()
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500  # "not implemented"


class Side:
    """The emulated AWS side as the stack starts it (its own process), for one set of parameters."""

    def __init__(self, parameters: dict[str, str], llm_url: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMORY_HUB_"))}
        env[SEED_VARIABLE] = SEED.hex()
        env[converse.PARAMETERS_VARIABLE] = json.dumps(parameters)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "infra" / "local"), env.get("PYTHONPATH", "")])
        if llm_url:
            env[converse.URL_VARIABLE], env[converse.MODEL_VARIABLE] = llm_url, "tiny-model"
        command = [sys.executable, "-m", "memory_hub_local.aws", "--port", "0", "--region", REGION, "--data-dir", ""]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(b"READY "):
                self.url = f"http://127.0.0.1:{json.loads(line[6:])['port']}"
                break
        else:
            raise AssertionError(f"the AWS side exited ({self.process.wait()})")
        self.credentials = Credentials(SEED)

    def client(self, function: str | None = None) -> Any:
        who = self.credentials.operator if function is None else self.credentials.function(function)
        return bedrock_client(self.url, who.access_key, who.secret, who.token)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def side(scripted: ScriptedServer) -> Iterator[Side]:
    running = Side({"Formation": "Enabled", "Embeddings": "Disabled"}, scripted.url)
    yield running
    running.close()


def error_of(action) -> tuple[int, str, dict[str, Any]]:
    with pytest.raises(ClientError) as failed:
        action()
    response = failed.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"], response


def test_the_patched_side_serves_converse_for_the_formation_model_relayed_to_the_model(side, model):
    conversation = {"messages": [{"id": "m1", "role": "user", "content": "I like tea", "time": "t", "context": False}]}
    prompt = f"Form memories.\n<conversation>\n{json.dumps(conversation)}\n</conversation>"
    answer = side.client().converse(
        modelId=MODEL,
        system=[{"text": "You form memory."}],
        messages=[{"role": "user", "content": [{"text": prompt}]}],
        toolConfig=tool_config({"tool": {"name": SAVE_MEMORIES}}),
        inferenceConfig={"maxTokens": 1000, "temperature": 0.0},
    )
    (block,) = answer["output"]["message"]["content"]
    assert block["toolUse"]["name"] == SAVE_MEMORIES and answer["stopReason"] == "tool_use"
    assert block["toolUse"]["input"] == {
        "memories": [{"op": "add", "type": "episodic", "content": fact_of("I like tea"), "source_message_ids": ["m1"]}]
    }
    assert answer["usage"]["totalTokens"] == answer["usage"]["inputTokens"] + answer["usage"]["outputTokens"] > 0
    assert answer["metrics"]["latencyMs"] >= 0
    (sent,) = model.requests()
    assert sent["model"] == "tiny-model" and sent["messages"][0] == {"role": "system", "content": "You form memory."}
    # by its foundation-model ARN and its inference-profile ARN too; another model is no model here
    for named in (
        f"arn:aws:bedrock:{REGION}::foundation-model/{MODEL}",
        f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{MODEL}",
    ):
        assert side.client().converse(modelId=named, messages=HELLO)["stopReason"] == "end_turn"
    for other in ("amazon.nova-pro-v1:0", f"arn:aws:bedrock:eu-west-1::foundation-model/{MODEL}"):
        status, code, response = error_of(lambda other=other: side.client().converse(modelId=other, messages=HELLO))
        assert (status, code) == (400, "ValidationException")
        assert response["Error"]["Message"] == "The provided model identifier is invalid."


def test_the_side_holds_each_function_to_its_policy_as_the_parameters_make_it(side, model):
    """Formation=Enabled gives FormationFunction the formation model; no other function has it."""
    assert side.client("FormationFunction").converse(modelId=MODEL, messages=HELLO)["stopReason"] == "end_turn"
    status, code, response = error_of(lambda: side.client("ScenarioFunction").converse(modelId=MODEL, messages=HELLO))
    assert (status, code) == (403, "AccessDeniedException")
    assert (
        "bedrock:InvokeModel on resource: arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0"
        in (response["Error"]["Message"])
    )
    assert len(model.requests()) == 1, "a refused call reaches no model"


def test_with_formation_disabled_no_function_may_converse():
    off = Side({"Formation": "Disabled"}, None)
    try:
        status, code, _ = error_of(lambda: off.client("FormationFunction").converse(modelId=MODEL, messages=HELLO))
        assert (status, code) == (403, "AccessDeniedException")
        status, code, response = error_of(lambda: off.client().converse(modelId=MODEL, messages=HELLO))
        assert (status, code) == (503, "ServiceUnavailableException")
        assert response["Error"]["Message"] == "no language model is configured: set MEMORY_HUB_LLM_URL"
    finally:
        off.close()


def test_bedrock_s_errors_reach_the_sdk_as_its_exceptions(side, model):
    bedrock = side.client()
    model.script({"status": 429}, {"status": 500, "body": {"error": {"message": "the GPU fell over"}}})
    with pytest.raises(bedrock.exceptions.ThrottlingException):
        bedrock.converse(modelId=MODEL, messages=HELLO)
    with pytest.raises(bedrock.exceptions.ModelErrorException) as failed:
        bedrock.converse(modelId=MODEL, messages=HELLO)
    assert failed.value.response["originalStatusCode"] == 500 and failed.value.response["resourceName"] == MODEL
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 424
    status, code, _ = error_of(
        lambda: bedrock.converse(modelId=MODEL, messages=[{"role": "assistant", "content": [{"text": "x"}]}])
    )
    assert (status, code) == (400, "ValidationException")


# ---------------------------------------------------------------- Converse → chat completions


def test_system_text_tools_tool_uses_and_results_reach_the_server_translated(relay, model):
    messages = [
        {"role": "user", "content": [{"text": "What is the weather?"}, {"text": "In Paris."}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "t-1", "name": "weather", "input": {"city": "Paris"}}},
                {"toolUse": {"toolUseId": "t-2", "name": "weather", "input": {"city": "Lyon"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "t-1", "content": [{"json": {"c": 21}}, {"text": "sunny"}]}},
                {"toolResult": {"toolUseId": "t-2", "content": [{"text": "no data"}], "status": "error"}},
                {"text": "Thanks."},
            ],
        },
    ]
    weather = {"toolSpec": {"name": "weather", "inputSchema": {"json": {"type": "object"}}}}
    call(
        relay,
        system=[{"text": "Be brief."}, {"text": "Be kind."}],
        messages=messages,
        toolConfig=tool_config({"auto": {}}, weather),
        inferenceConfig={"maxTokens": 200, "temperature": 0.5, "topP": 0.9, "stopSequences": ["END"]},
    )
    (sent,) = model.requests()
    assert sent["model"] == "tiny-model" and sent["stream"] is False
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief.\n\nBe kind."},
        {"role": "user", "content": "What is the weather?\nIn Paris."},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "t-1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                {"id": "t-2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lyon"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "t-1", "content": '{"c":21}\nsunny'},
        {"role": "tool", "tool_call_id": "t-2", "content": "Error: no data"},
        {"role": "user", "content": "Thanks."},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": SAVE_MEMORIES,
                "parameters": SAVE_SPEC["toolSpec"]["inputSchema"]["json"],
                "description": SAVE_SPEC["toolSpec"]["description"],
            },
        },
        {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}},
    ]
    assert sent["tool_choice"] == "auto"
    assert (sent["max_tokens"], sent["temperature"], sent["top_p"], sent["stop"]) == (200, 0.5, 0.9, ["END"])


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ({"tool": {"name": SAVE_MEMORIES}}, {"type": "function", "function": {"name": SAVE_MEMORIES}}),
        ({"any": {}}, "required"),
        ({"auto": {}}, "auto"),
        (None, None),
    ],
)
def test_tool_choice_is_translated(relay, model, choice, wire):
    call(relay, messages=HELLO, toolConfig=tool_config(choice))
    (sent,) = model.requests()
    assert sent.get("tool_choice") == wire


def test_the_bearer_key_is_sent_and_an_unset_model_name_is_the_converse_model(scripted, model):
    """The key goes as Authorization (the scripted server takes any); no MEMORY_HUB_LLM_MODEL: the
    Bedrock model id is the name sent."""
    call(converse.Relay(scripted.url), messages=HELLO)
    assert model.requests()[0]["model"] == MODEL
    assert converse.Relay.from_environment({"MEMORY_HUB_LLM_URL": "http://h:1/v1/", "MEMORY_HUB_LLM_KEY": "k"}) == (
        converse.Relay("http://h:1/v1", None, "k", converse.DEFAULT_TIMEOUT_S)
    )


# ---------------------------------------------------------------- chat completions → Converse


def test_tool_calls_become_tool_uses_and_text_a_text_block(relay, model):
    model.script({"text": "Here you go.", "tool_calls": [{"name": SAVE_MEMORIES, "arguments": {"memories": [1]}}]})
    answer = call(relay, messages=HELLO, toolConfig=tool_config({"any": {}}))
    text, use = answer["output"]["message"]["content"]
    assert text == {"text": "Here you go."}
    assert use["toolUse"]["name"] == SAVE_MEMORIES and use["toolUse"]["input"] == {"memories": [1]}
    assert use["toolUse"]["toolUseId"] == "call_1_0"
    assert answer["stopReason"] == "tool_use" and answer["output"]["message"]["role"] == "assistant"


def test_several_calls_are_kept_in_order(relay, model):
    model.script({"tool_calls": [{"name": SAVE_MEMORIES, "arguments": {"memories": [i]}} for i in range(3)]})
    answer = call(relay, messages=HELLO, toolConfig=tool_config())
    assert [b["toolUse"]["input"]["memories"] for b in answer["output"]["message"]["content"]] == [[0], [1], [2]]


@pytest.mark.parametrize(
    ("scripted_answer", "stop"),
    [
        ({"text": "done"}, "end_turn"),
        ({"tool_input": {"memories": []}}, "tool_use"),
        ({"finish_reason": "length", "tool_input": {"memories": []}}, "max_tokens"),
        ({"finish_reason": "length", "text": "cut sho"}, "max_tokens"),
        ({"finish_reason": "content_filter", "text": "..."}, "content_filtered"),
        ({"finish_reason": "tool_calls", "text": "no call after all"}, "end_turn"),
    ],
)
def test_finish_reasons_become_stop_reasons(relay, model, scripted_answer, stop):
    model.script(scripted_answer)
    assert call(relay, messages=HELLO, toolConfig=tool_config())["stopReason"] == stop


def test_usage_is_the_server_s_token_counts(relay, model):
    model.script({"text": "x" * 400})
    answer = call(relay, messages=HELLO)
    reply_usage = model.stats()
    assert answer["usage"] == {
        "inputTokens": reply_usage["prompt_tokens"],
        "outputTokens": 100,
        "totalTokens": reply_usage["prompt_tokens"] + 100,
    }


@pytest.mark.parametrize(
    "text",
    [
        '{"memories": [{"op": "add"}]}',
        '```json\n{"memories": [{"op": "add"}]}\n```',
        '  ```\n{"memories": [{"op": "add"}]}\n```\n',
    ],
)
def test_a_whole_text_json_object_counts_as_the_required_tool_s_call(relay, model, text):
    model.script({"text": text})
    answer = call(relay, messages=HELLO, toolConfig=tool_config({"tool": {"name": SAVE_MEMORIES}}))
    (block,) = answer["output"]["message"]["content"]
    assert block["toolUse"]["name"] == SAVE_MEMORIES and block["toolUse"]["input"] == {"memories": [{"op": "add"}]}
    assert block["toolUse"]["toolUseId"].startswith("tooluse_") and answer["stopReason"] == "tool_use"


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ('{"memories": []}', {"auto": {}}),  # no tool was required
        ('Sure! {"memories": []}', {"tool": {"name": SAVE_MEMORIES}}),  # not the whole text
        ('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', {"tool": {"name": SAVE_MEMORIES}}),  # two fences
        ("[1, 2]", {"tool": {"name": SAVE_MEMORIES}}),  # not an object
    ],
)
def test_other_texts_stay_text(relay, model, text, choice):
    model.script({"text": text})
    answer = call(relay, messages=HELLO, toolConfig=tool_config(choice))
    assert answer["output"]["message"]["content"] == [{"text": text}] and answer["stopReason"] == "end_turn"


def test_any_with_one_tool_offered_requires_it(relay, model):
    model.script({"text": '{"memories": []}'})
    answer = call(relay, messages=HELLO, toolConfig=tool_config({"any": {}}))
    assert answer["output"]["message"]["content"][0]["toolUse"]["input"] == {"memories": []}


@pytest.mark.parametrize(
    "bad",
    [
        {"name": SAVE_MEMORIES, "arguments": "not json"},
        {"name": SAVE_MEMORIES, "arguments": "[1, 2]"},
        {"name": SAVE_MEMORIES, "arguments": '{"memories": [1'},
        {"name": "not_offered", "arguments": {}},
    ],
)
def test_arguments_that_are_no_json_object_are_a_malformed_tool_use(relay, model, bad):
    model.script({"tool_calls": [bad, {"name": SAVE_MEMORIES, "arguments": {"memories": []}}]})
    answer = call(relay, messages=HELLO, toolConfig=tool_config({"tool": {"name": SAVE_MEMORIES}}))
    assert answer["stopReason"] == "malformed_tool_use"
    assert [b["toolUse"]["input"] for b in answer["output"]["message"]["content"]] == [{"memories": []}]


def test_a_call_without_arguments_has_an_empty_input(relay, model):
    model.script({"tool_calls": [{"name": SAVE_MEMORIES, "arguments": ""}]})
    answer = call(relay, messages=HELLO, toolConfig=tool_config())
    assert answer["output"]["message"]["content"][0]["toolUse"]["input"] == {}


def test_a_reply_that_is_no_chat_completion_is_a_model_error():
    request = converse.parse_request(json.dumps({"messages": HELLO}).encode())
    for junk in ({}, {"choices": []}, {"choices": ["x"]}, []):
        with pytest.raises(Refusal) as refused:
            converse.from_openai(junk, request, {"messages": []}, 1)
        assert refused.value.status == 424 and refused.value.code == "ModelErrorException"
    answer = converse.from_openai({"choices": [{"message": {"content": "hi"}}]}, request, {"messages": []}, 7)
    assert answer["usage"]["inputTokens"] >= 1 and answer["usage"]["outputTokens"] >= 1, "estimated without usage"
    assert answer["stopReason"] == "end_turn" and answer["metrics"] == {"latencyMs": 7}


# ---------------------------------------------------------------- the server's failures


@pytest.mark.parametrize(
    ("status", "expected", "code"),
    [
        (429, 429, "ThrottlingException"),
        (401, 403, "AccessDeniedException"),
        (403, 403, "AccessDeniedException"),
        (400, 400, "ValidationException"),
        (422, 400, "ValidationException"),
        (404, 404, "ResourceNotFoundException"),
        (500, 424, "ModelErrorException"),
        (501, 424, "ModelErrorException"),
        (502, 503, "ServiceUnavailableException"),
        (503, 503, "ServiceUnavailableException"),
        (504, 408, "ModelTimeoutException"),
    ],
)
def test_each_upstream_status_is_bedrock_s_error(relay, model, status, expected, code):
    model.script({"status": status, "body": {"error": {"message": "context length exceeded"}}})
    answered, named, body = refusal(relay, messages=HELLO)
    assert (answered, named) == (expected, code)
    if code == "ValidationException":
        assert body["message"] == "The model returned the following errors: context length exceeded"
    if code == "ModelErrorException":
        assert body["originalStatusCode"] == status and body["resourceName"] == MODEL


def test_a_server_slower_than_the_timeout_is_a_model_timeout(scripted, model):
    model.script({"delay_s": 1.5})
    status, code, _ = refusal(converse.Relay(scripted.url, timeout_s=0.3), messages=HELLO)
    assert (status, code) == (408, "ModelTimeoutException")


def test_no_server_is_service_unavailable(model):
    from memory_hub_local.stack import free_port

    status, code, body = refusal(converse.Relay(f"http://127.0.0.1:{free_port()}/v1"), messages=HELLO)
    assert (status, code) == (503, "ServiceUnavailableException") and "cannot be reached" in body["message"]
    status, code, body = refusal(converse.Relay(None), messages=HELLO)
    assert (status, code, body["message"]) == (503, "ServiceUnavailableException", converse.NOT_CONFIGURED)


def test_the_scripted_server_s_routes(scripted, model):
    client = ScriptedClient(scripted.url)
    assert client.script({"text": "one"}, {"text": "two"}) == 2
    client.clear_script()
    client.reset_stats()
    call(converse.Relay(scripted.url), messages=HELLO)
    assert client.stats()["calls"] == 1 and len(client.requests()) == 1
    client.clear_requests()
    assert client.requests() == []
    assert (
        ScriptedClient("http://127.0.0.1:1/v1/").root
        == ScriptedClient("http://127.0.0.1:1").root
        == "http://127.0.0.1:1"
    )


# ---------------------------------------------------------------- the request, checked as Bedrock checks it


TOOL_USE = {"toolUse": {"toolUseId": "t1", "name": SAVE_MEMORIES, "input": {}}}
TOOL_RESULT = {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}
START = "A conversation must start with a user message. Try again with a conversation that starts with a user message."
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation alternates "
    "between user and assistant roles and try again."
)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({}, START),
        ({"messages": []}, START),
        ({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}, START),
        ({"messages": [*HELLO, *HELLO]}, ALTERNATE),
        (
            {"messages": [{"role": "user", "content": []}]},
            "The content field in the Message object at messages.0 is empty",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "  "}]}]},
            "The text field in the ContentBlock object at messages.0.content.0 is blank",
        ),
        (
            {"messages": [{"role": "system", "content": [{"text": "x"}]}]},
            "Member must satisfy enum value set: [user, assistant]",
        ),
        ({"messages": [{"role": "user", "content": [{"image": {}}]}]}, "relays only text, toolUse and toolResult"),
        ({"messages": [{"role": "user", "content": [{"text": "a", "toolUse": {}}]}]}, "must set exactly one member"),
        (
            {
                "messages": [
                    HELLO[0],
                    {"role": "assistant", "content": [TOOL_USE]},
                    {"role": "user", "content": [TOOL_RESULT]},
                ]
            },
            "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        ),
        (
            {
                "messages": [HELLO[0], {"role": "assistant", "content": [TOOL_USE]}, HELLO[0]],
                "toolConfig": tool_config(),
            },
            "Expected toolResult blocks at messages.2.content for the following Ids: t1",
        ),
        (
            {"messages": [{"role": "user", "content": [TOOL_RESULT]}], "toolConfig": tool_config()},
            "The number of toolResult blocks at messages.0.content exceeds the number of toolUse blocks of previous",
        ),
        (
            {
                "messages": [
                    HELLO[0],
                    {"role": "assistant", "content": [TOOL_USE]},
                    {
                        "role": "user",
                        "content": [{"toolResult": {"toolUseId": "t1", "content": [], "status": "error"}}],
                    },
                ],
                "toolConfig": tool_config(),
            },
            "The content field at messages.2.content.0.toolResult cannot be empty when status value is error.",
        ),
        (
            {"messages": HELLO, "toolConfig": {"tools": []}},
            "Value '[]' at 'toolConfig.tools' failed to satisfy constraint",
        ),
        ({"messages": HELLO, "toolConfig": {"tools": [SAVE_SPEC, SAVE_SPEC]}}, "duplicate tool names"),
        (
            {"messages": HELLO, "toolConfig": tool_config({"tool": {"name": "other"}})},
            "The tool other named by toolConfig.toolChoice is not one of the tools",
        ),
        ({"messages": HELLO, "toolConfig": tool_config({"auto": {}, "any": {}})}, "must set exactly one member"),
        (
            {
                "messages": HELLO,
                "toolConfig": {"tools": [{"toolSpec": {"name": "bad name!", "inputSchema": {"json": {}}}}]},
            },
            "Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
        ),
        (
            {"messages": HELLO, "inferenceConfig": {"maxTokens": 0}},
            "1 validation error detected: Value '0' at 'inferenceConfig.maxTokens' failed to satisfy constraint: "
            "Member must have value greater than or equal to 1",
        ),
        (
            {"messages": HELLO, "inferenceConfig": {"temperature": 1.5}},
            "Member must have value less than or equal to 1",
        ),
        ({"messages": HELLO, "inferenceConfig": {"topP": -0.1}}, "Member must have value greater than or equal to 0"),
        ({"messages": HELLO, "inferenceConfig": {"stopSequences": [""]}}, "inferenceConfig.stopSequences.1.member"),
        ({"messages": HELLO, "system": [{"text": ""}]}, "at 'system.1.member.text'"),
        ({"messages": HELLO, "guardrailConfig": {"guardrailIdentifier": "g"}}, "does not relay guardrailConfig"),
    ],
)
def test_a_request_bedrock_refuses_is_refused_in_its_words_before_any_model_is_asked(relay, model, request_, message):
    status, code, body = refusal(relay, **request_)
    assert (status, code) == (400, "ValidationException")
    assert message in body["message"], body["message"]
    assert model.requests() == []


def test_a_body_that_is_no_json_object_is_malformed(relay):
    for body in (b"not json", b"[1]"):
        with pytest.raises(Refusal) as refused:
            converse.converse(MODEL, body, {MODEL}, REGION, relay)
        assert refused.value.status == 400 and b"Malformed input request" in refused.value.body


def test_the_served_models_are_the_formation_model_as_the_stack_resolved_it():
    template = {"Parameters": {"FormationModel": {"Type": "String", "Default": MODEL}}}
    assert converse.served_models(template, {}, {}) == {MODEL}
    assert converse.served_models(template, {"FormationModel": "us.amazon.nova-pro-v1:0"}, {}) == {
        "us.amazon.nova-pro-v1:0"
    }
    listed = {converse.MODELS_VARIABLE: "a.b-v1:0, c.d-v2:0"}
    assert converse.served_models({}, {}, listed) == {converse.DEFAULT_MODEL, "a.b-v1:0", "c.d-v2:0"}
    parameters = {converse.PARAMETERS_VARIABLE: json.dumps({"FormationModel": "x.y-v1:0"})}
    assert converse.served_models(template, None, parameters) == {"x.y-v1:0"}
    assert vector_calls.model_resource(REGION, "us.amazon.nova-lite-v1:0") == (
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0"
    )
    assert vector_calls.model_resource(REGION, MODEL) == f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}"
