"""template.yaml as the local stack deploys it: SAM expanded to CloudFormation by AWS's own SAM
translator (so functions get exactly the environment and IAM policies they get on AWS), then every
intrinsic function resolved against the local resources' names and ARNs."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

# template.yaml as written is read by the tools' reader (the OpenAPI generator needs it without the
# local stack); its names are re-exported here for the stack's modules, the bench and the tests.
from memory_hub_tools.template_file import ROOT as ROOT
from memory_hub_tools.template_file import TEMPLATE as TEMPLATE
from memory_hub_tools.template_file import load_raw as load_raw

STACK_NAME = "memory-hub"
ACCOUNT = "123456789012"  # moto's account
PARTITION = "aws"
LOCAL_BUCKET = "memory-hub-local"
STACK_UUID = "00000000-0000-4000-8000-000000000000"  # the local stack's id, as the third part of AWS::StackId


def stack_id(region: str) -> str:
    return f"arn:{PARTITION}:cloudformation:{region}:{ACCOUNT}:stack/{STACK_NAME}/{STACK_UUID}"


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


def cache_dir() -> Path:
    """Where expanded templates are kept between starts: ``MEMORY_HUB_CACHE_DIR``, else under the
    interpreter's prefix (the project's ``.venv``, which ``make clean`` removes)."""
    return Path(os.environ.get("MEMORY_HUB_CACHE_DIR") or Path(sys.prefix) / "var" / "memory-hub")


@lru_cache(maxsize=4)
def _expanded(text_digest: str, region: str, path: Path) -> dict[str, Any]:
    """The template after AWS's SAM transform (what CloudFormation deploys), made by a child process
    (``python -m memory_hub_local.template REGION PATH``): the translator, pydantic v1 and their
    schemas (~25 MiB once imported, and never released) stay out of the stack's long-lived processes.
    The result is kept on disk (``cache_dir``), keyed by the template, the region, this module and
    the translator's version: the stack's process and the emulated AWS side's each needed a
    transform at every start (~1 s of CPU apiece), and the same inputs always expand the same."""
    from importlib import metadata

    parts = [text_digest, region, hashlib.sha256(Path(__file__).read_bytes()).hexdigest()]
    parts.append(metadata.version("aws-sam-translator"))
    cached = cache_dir() / f"transform-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()}.json"
    try:
        kept: dict[str, Any] = json.loads(cached.read_bytes())
        return kept
    except (OSError, ValueError):
        pass  # not made yet, or unreadable: transform again
    done = subprocess.run(
        [sys.executable, "-m", "memory_hub_local.template", region, str(path)],
        capture_output=True,
        check=False,
        timeout=300,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"the SAM transform of {path.name} failed: {message[0]}")
    expanded: dict[str, Any] = json.loads(done.stdout)
    _keep(cached, done.stdout)
    return expanded


def _keep(target: Path, data: bytes) -> None:
    """Write ``target`` whole or not at all (a reader never sees part of it); nothing where the
    folder cannot be written (the next start transforms again)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".transform-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


def transform_here(region: str, path: Path = TEMPLATE) -> dict[str, Any]:
    """The SAM transform in this process (the child's work)."""
    from samtranslator.translator.transform import transform

    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    raw = load_raw(path)
    for resource in raw["Resources"].values():  # the translator wants S3 locations for code
        props = resource.get("Properties", {})
        for name in ("CodeUri", "ContentUri"):
            if isinstance(props.get(name), str):
                props[name] = f"s3://local/{props[name]}"
    pseudo = {
        "AWS::Region": region,
        "AWS::AccountId": ACCOUNT,
        "AWS::StackName": STACK_NAME,
        "AWS::Partition": PARTITION,
    }
    previous = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = region  # the translator looks the region up itself
    try:
        expanded: dict[str, Any] = transform(copy.deepcopy(raw), pseudo, _NoManagedPolicies())
        return expanded
    finally:
        if previous is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
        else:
            os.environ["AWS_DEFAULT_REGION"] = previous


def expanded(region: str, path: Path = TEMPLATE) -> dict[str, Any]:
    return _expanded(hashlib.sha256(path.read_bytes()).hexdigest(), region, path)


@dataclass(frozen=True)
class Statement:
    actions: tuple[str, ...]
    resources: tuple[str, ...]

    def allows(self, action: str, resource: str) -> bool:
        return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in self.actions) and any(
            fnmatch.fnmatchcase(resource, r) for r in self.resources
        )


@dataclass(frozen=True)
class Schedule:
    """A function's enabled ``Schedule`` event: its expression and the event it sends (``Input``)."""

    expression: str
    event: dict[str, Any]


@dataclass(frozen=True)
class Function:
    logical_id: str
    name: str
    code_uri: Path
    handler: str
    timeout: int
    memory: int
    environment: dict[str, str]
    layers: tuple[Path, ...]
    policy: tuple[Statement, ...]
    routes: tuple[tuple[str, str], ...] = ()
    schedules: tuple[Schedule, ...] = ()

    def allows(self, action: str, resource: str) -> bool:
        return any(statement.allows(action, resource) for statement in self.policy)


@dataclass
class Deployment:
    """The template resolved against one local stack's resource names."""

    region: str
    names: dict[str, str]  # logical id → physical name
    arns: dict[str, str]  # logical id → ARN (where it has one)
    parameters: dict[str, str] = field(default_factory=dict)
    cfn: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)

    # ---------------------------------------------------------------- intrinsic functions
    def condition(self, name: str) -> bool:
        return bool(self.value(self.cfn.get("Conditions", {})[name]))

    def _pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": STACK_NAME,
            "AWS::StackId": stack_id(self.region),
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
        }.get(name)

    def _ref(self, name: str) -> Any:
        pseudo = self._pseudo(name)
        if pseudo is not None:
            return pseudo
        if name in self.parameters:
            return self.parameters[name]
        if name in self.cfn.get("Parameters", {}):
            return str(self.cfn["Parameters"][name].get("Default", ""))
        if name in self.names:
            if self.cfn["Resources"].get(name, {}).get("Type") == "AWS::SQS::Queue":  # a queue's Ref is its URL
                return f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT}/{self.names[name]}"
            return self.arns.get(name, self.names[name]) if self._ref_is_arn(name) else self.names[name]
        raise KeyError(f"cannot resolve Ref {name}")

    def _ref_is_arn(self, name: str) -> bool:
        kind = self.cfn["Resources"].get(name, {}).get("Type", "")
        return kind in (
            "AWS::SecretsManager::Secret",
            "AWS::SNS::Topic",
            "AWS::Lambda::LayerVersion",
            "AWS::S3Vectors::VectorBucket",  # its Ref is its ARN
        )

    def _get_att(self, name: str, attribute: str) -> str:
        if attribute in ("Arn", "VectorBucketArn"):
            return self.arns[name]
        if attribute in ("QueueName", "Name"):
            return self.names[name]
        raise KeyError(f"cannot resolve GetAtt {name}.{attribute}")

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.value(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                return self._get_att(*name.split(".", 1))
            return str(self._ref(name))

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def value(self, node: Any) -> Any:
        """``node`` with every intrinsic function resolved (AWS::NoValue drops the entry)."""
        if isinstance(node, list):
            return [v for v in (self.value(n) for n in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            intrinsic = _INTRINSICS.get(key)
            if intrinsic is not None:
                return intrinsic(self, arg)
        return {k: v for k, v in ((k, self.value(v)) for k, v in node.items()) if v is not _NO_VALUE}


def _fn_ref(deployment: Deployment, arg: Any) -> Any:
    return _NO_VALUE if arg == "AWS::NoValue" else deployment._ref(arg)


def _fn_get_att(deployment: Deployment, arg: Any) -> Any:
    name, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
    return deployment._get_att(name, attribute)


def _fn_sub(deployment: Deployment, arg: Any) -> Any:
    text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
    return deployment._sub(text, variables)


def _fn_if(deployment: Deployment, arg: Any) -> Any:
    name, yes, no = arg
    return deployment.value(yes if deployment.condition(name) else no)


def _fn_join(deployment: Deployment, arg: Any) -> Any:
    return str(deployment.value(arg[0])).join(str(v) for v in deployment.value(arg[1]))


def _fn_select(deployment: Deployment, arg: Any) -> Any:
    return deployment.value(arg[1])[int(deployment.value(arg[0]))]


def _fn_split(deployment: Deployment, arg: Any) -> Any:
    return str(deployment.value(arg[1])).split(str(deployment.value(arg[0])))


def _fn_equals(deployment: Deployment, arg: Any) -> Any:
    return str(deployment.value(arg[0])) == str(deployment.value(arg[1]))


# The intrinsic functions the template uses, by the key that names them (a one-key mapping).
_INTRINSICS: dict[str, Callable[[Deployment, Any], Any]] = {
    "Ref": _fn_ref,
    "Fn::GetAtt": _fn_get_att,
    "Fn::Sub": _fn_sub,
    "Fn::If": _fn_if,
    "Fn::Join": _fn_join,
    "Fn::Select": _fn_select,
    "Fn::Split": _fn_split,
    "Fn::Equals": _fn_equals,
    "Fn::Not": lambda deployment, arg: not deployment.value(arg[0]),
    "Fn::And": lambda deployment, arg: all(deployment.value(a) for a in arg),
    "Fn::Or": lambda deployment, arg: any(deployment.value(a) for a in arg),
    "Condition": lambda deployment, arg: deployment.condition(arg),
}


_NO_VALUE = object()


def local_names(region: str, secret_arns: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Physical names and ARNs of every resource of the template, as the local stack makes them."""
    cfn = expanded(region)
    names: dict[str, str] = {}
    arns: dict[str, str] = {}
    prefix = f"arn:{PARTITION}"
    for logical_id, resource in cfn["Resources"].items():
        kind = resource["Type"]
        name = logical_id
        if kind == "AWS::S3::Bucket":
            name = LOCAL_BUCKET
            arns[logical_id] = f"{prefix}:s3:::{name}"
        elif kind == "AWS::DynamoDB::Table":
            arns[logical_id] = f"{prefix}:dynamodb:{region}:{ACCOUNT}:table/{name}"
        elif kind == "AWS::SQS::Queue":
            arns[logical_id] = f"{prefix}:sqs:{region}:{ACCOUNT}:{name}"
        elif kind == "AWS::SNS::Topic":
            arns[logical_id] = f"{prefix}:sns:{region}:{ACCOUNT}:{name}"
        elif kind == "AWS::Logs::LogGroup":
            arns[logical_id] = f"{prefix}:logs:{region}:{ACCOUNT}:log-group:{name}:*"
        elif kind == "AWS::IAM::Role":
            arns[logical_id] = f"{prefix}:iam::{ACCOUNT}:role/{name}"
        elif kind == "AWS::SecretsManager::Secret":
            arns[logical_id] = secret_arns.get(logical_id, f"{prefix}:secretsmanager:{region}:{ACCOUNT}:secret:{name}")
        elif kind == "AWS::Lambda::LayerVersion":
            arns[logical_id] = f"{prefix}:lambda:{region}:{ACCOUNT}:layer:{name}:1"
        elif kind == "AWS::S3Vectors::VectorBucket":  # CloudFormation names them in lower case
            given = resource.get("Properties", {}).get("VectorBucketName")
            name = (
                str(Deployment(region, {}, {}, {}, cfn).value(given)) if given else f"{STACK_NAME}-{logical_id.lower()}"
            )
            arns[logical_id] = f"{prefix}:s3vectors:{region}:{ACCOUNT}:bucket/{name}"
        names[logical_id] = name
    return names, arns


def deploy(region: str, secret_arns: dict[str, str], parameters: dict[str, str] | None = None) -> Deployment:
    """Resolve the template for the local stack: every function with its handler, environment,
    timeout, routes and IAM policy."""
    cfn = expanded(region)
    names, arns = local_names(region, secret_arns)
    deployment = Deployment(region, names, arns, dict(parameters or {}), cfn)
    raw = load_raw()
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        name = str(deployment.value(props["FunctionName"])) if "FunctionName" in props else logical_id
        names[logical_id] = name
        arns[logical_id] = f"arn:{PARTITION}:lambda:{region}:{ACCOUNT}:function:{name}"
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        sam = raw["Resources"][logical_id]["Properties"]
        environment = {
            k: str(v) for k, v in deployment.value(props.get("Environment", {}).get("Variables", {})).items()
        }
        layers = tuple(ROOT / cfn_layer_uri(raw, layer) for layer in props.get("Layers", []))
        role = props["Role"]["Fn::GetAtt"][0]
        statements = []
        for policy in cfn["Resources"][role]["Properties"].get("Policies", []):
            for statement in deployment.value(policy["PolicyDocument"]["Statement"]):
                if statement.get("Effect") != "Allow":
                    continue
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                resources = (
                    statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                )
                statements.append(Statement(tuple(actions), tuple(str(r) for r in resources)))
        routes, schedules = [], []
        for event in sam.get("Events", {}).values():
            if event["Type"] == "Api":
                routes.append((event["Properties"]["Path"], event["Properties"]["Method"].upper()))
            elif event["Type"] in ("Schedule", "ScheduleV2"):
                schedule = deployment.value(event["Properties"])
                if schedule.get("State", "ENABLED") != "DISABLED" and schedule.get("Enabled", True) is not False:
                    given = schedule.get("Input")
                    schedules.append(Schedule(str(schedule.get("Schedule", "")), json.loads(given) if given else {}))
        deployment.functions[logical_id] = Function(
            logical_id=logical_id,
            name=names[logical_id],
            code_uri=ROOT / sam["CodeUri"],
            handler=props["Handler"],
            timeout=int(deployment.value(props.get("Timeout", 3))),
            memory=int(props.get("MemorySize", 128)),
            environment=environment,
            layers=layers,
            policy=tuple(statements),
            routes=tuple(routes),
            schedules=tuple(schedules),
        )
    return deployment


def cfn_layer_uri(raw: dict[str, Any], layer: Any) -> str:
    """Where a function's layer lives in the repository (its ``python/`` folder, as on /opt)."""
    logical_id = layer["Ref"] if isinstance(layer, dict) else str(layer)
    for name, resource in raw["Resources"].items():
        if name == logical_id or logical_id.startswith(name):
            return str(Path(resource["Properties"]["ContentUri"]) / "python")
    raise KeyError(f"unknown layer {layer}")


if __name__ == "__main__":
    json.dump(transform_here(sys.argv[1], Path(sys.argv[2])), sys.stdout)
