"""Reads template.yaml: functions (handler, routes, timeout, env), tables and the bucket."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: _tag(loader, suffix, node))


@dataclass(frozen=True)
class Function:
    logical_id: str
    code_uri: Path
    handler: str
    timeout: int
    environment: dict[str, Any]
    routes: tuple[tuple[str, str], ...]  # (path, method)
    schedules: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Template:
    resources: dict[str, Any]
    functions: dict[str, Function]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v.get("Type") == kind}


def load_raw(path: Path = TEMPLATE) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass


@lru_cache(maxsize=4)
def load(path: Path = TEMPLATE) -> Template:
    raw = load_raw(path)
    globals_fn = raw.get("Globals", {}).get("Function", {})
    resources = raw["Resources"]
    functions: dict[str, Function] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        env = dict(globals_fn.get("Environment", {}).get("Variables", {}))
        env.update(props.get("Environment", {}).get("Variables", {}))
        routes, schedules = [], []
        for event in props.get("Events", {}).values():
            if event["Type"] == "Api":
                routes.append((event["Properties"]["Path"], event["Properties"]["Method"].upper()))
            elif event["Type"] in ("Schedule", "ScheduleV2"):
                schedules.append(str(event["Properties"].get("Schedule") or event["Properties"].get(
                    "ScheduleExpression")))
        functions[logical_id] = Function(
            logical_id=logical_id,
            code_uri=ROOT / props["CodeUri"],
            handler=props.get("Handler", globals_fn.get("Handler", "app.lambda_handler")),
            timeout=int(props.get("Timeout", globals_fn.get("Timeout", 3))),
            environment=env,
            routes=tuple(routes),
            schedules=tuple(schedules),
        )
    return Template(resources, functions)
