"""edge/public.py and edge/console_rules.py: the console's modules are served as JavaScript under the
strict policy, and the field rules it shows are the domain's (``/console/rules.js``)."""

from __future__ import annotations

import json
import re

import pytest
from memory_hub.domain import fields, rules
from memory_hub.domain.scope import Scope
from memory_hub.edge.console_rules import console_rules, hint, module_text
from memory_hub.edge.public import CSP, RULES_MODULE, STATIC, answer

CONSOLE = STATIC / "console"
MODULES = sorted(path.name for path in CONSOLE.glob("*.js"))


def _rules_of_module() -> dict:
    text = module_text()
    prefix, _, body = text.partition("export default ")
    assert prefix.startswith("//") and body.endswith(";\n")
    return json.loads(body[:-2])


@pytest.mark.parametrize("name", [*MODULES, RULES_MODULE.rsplit("/", 1)[1]])
def test_every_module_is_served_as_javascript_under_the_policy(name):
    served = answer(f"/console/{name}")
    assert served is not None and served["statusCode"] == 200
    headers = served["headers"]
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"  # a module script needs a JS type
    assert headers["Content-Security-Policy"] == CSP and "script-src 'self'" in CSP
    assert headers["X-Content-Type-Options"] == "nosniff"
    if name in MODULES:
        assert served["body"] == (CONSOLE / name).read_text(encoding="utf-8")


def test_every_relative_import_names_a_module_that_is_served():
    for name in MODULES:
        text = (CONSOLE / name).read_text(encoding="utf-8")
        for target in re.findall(r"""from ["']([^"']+)["']|^import ["']([^"']+)["']""", text, re.M):
            path = "/console/" + (target[0] or target[1]).removeprefix("./")
            assert answer(path) is not None, (name, path)


def test_the_page_loads_its_entry_as_a_module():
    html = answer("/console")
    assert html is not None
    assert '<script type="module" src="console/app.js"></script>' in html["body"]


def test_the_rules_module_is_the_domains_field_rules():
    shown = _rules_of_module()
    assert shown == json.loads(json.dumps(console_rules()))
    by_field = shown["fields"]
    assert by_field["team_id"] == by_field["agent_id"]
    assert by_field["team_id"]["pattern"] == fields.TEAM_PATTERN
    assert by_field["user_id"] == by_field["session_id"]
    assert (by_field["user_id"]["minLength"], by_field["user_id"]["maxLength"]) == (1, rules.MAX_ID_CHARS)
    assert by_field["user_id"]["pattern"] == fields.NO_CONTROL_PATTERN
    assert by_field["type"]["pattern"] == fields.TYPE_PATTERN
    assert by_field["summary"]["maxLength"] == fields.SUMMARY_CHARS
    assert by_field["text"]["maxLength"] == fields.TEXT_CHARS
    assert by_field["path"]["maxBytes"] == rules.MAX_PATH_BYTES
    team, agent = "acme", "support"
    spelled = shown["memory_id"].replace("{team_id}", team).replace("{agent_id}", agent)
    assert spelled == Scope(team, agent, "u").memory_id


def test_the_hints_say_the_rules_in_words():
    assert hint({"minLength": 1, "maxLength": 256, "pattern": fields.NO_CONTROL_PATTERN}) == (
        "1–256 characters, no control characters"
    )
    assert hint({"maxLength": 1_000_000}) == "up to 1,000,000 characters"
    assert hint({"maxBytes": 512}) == "up to 512 UTF-8 bytes"
    assert hint({"pattern": "^[a-z]+$"}) == "matching ^[a-z]+$"
    by_field = console_rules()["fields"]
    assert by_field["summary"]["hint"] == f"up to {fields.SUMMARY_CHARS:,} characters, no control characters"


def test_every_control_with_a_rule_names_a_field_the_rules_have():
    html = (CONSOLE / "index.html").read_text(encoding="utf-8")
    named = set(re.findall(r'data-rule="([^"]+)"', html))
    assert named and named <= set(console_rules()["fields"])
    assert {"team_id", "agent_id", "user_id", "summary", "text", "path"} <= named
