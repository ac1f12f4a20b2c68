"""The repository's ``template.yaml`` read as written: CloudFormation's short tags (``!Ref``,
``!Sub``, ``!GetAtt`` …) become their long forms (``{"Ref": …}``, ``{"Fn::Sub": …}``), nothing is
expanded or resolved.

Here, in the tools, because the tools read it themselves (the OpenAPI generator finds the
functions' code through it, ``invoke`` names its functions) and must not reach into the local
stack for it; the local stack reads the template through this module too, before SAM expands it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]  # the repository: this file is infra/tools/memory_hub_tools/template_file.py
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type stubs here: SafeLoader is Any
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    name = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_raw(path: Path = TEMPLATE) -> dict[str, Any]:
    template: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader
    return template
