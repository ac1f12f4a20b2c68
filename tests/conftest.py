"""Fixtures of every tier. The API tier's stack is the one ``make run`` starts — the emulated AWS
side in its own process, each function in its own, API Gateway in front — on free ports, with
nothing kept on disk and the test hooks of the AWS side on. One stack serves the whole session;
tests isolate themselves with fresh team/agent ids (``scope``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers import ADMIN_KEY, Api, Hooks, Scope, make_scope

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="session")
def stack():
    from memory_hub_local.stack import Stack

    ARTIFACTS.mkdir(exist_ok=True)
    os.environ["MEMORY_HUB_BOOTSTRAP_ADMIN_KEY"] = ADMIN_KEY
    log = open(ARTIFACTS / "stack.log", "ab")  # noqa: SIM115 - open for the whole session
    stack = Stack(port=0, lambda_port=0, aws_port=0, data_dir=None, test_hooks=True, log=log)
    stack.start()
    previous = {name: os.environ.get(name) for name in stack.aws_environment()}
    os.environ.update(stack.aws_environment())
    yield stack
    stack.stop()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    log.close()


@pytest.fixture(scope="session")
def api(stack) -> Api:
    return Api(stack.api_url, lambda_url=stack.lambda_url)


@pytest.fixture(scope="session")
def hooks(stack) -> Hooks:
    return Hooks(stack.aws_url)


@pytest.fixture(autouse=True)
def _no_hooks_left(request):
    """A test's pauses and faults never reach the next test."""
    yield
    if "hooks" in request.fixturenames:
        request.getfixturevalue("hooks").clear()


@pytest.fixture
def scope() -> Scope:
    return make_scope()


@pytest.fixture
def function_env(stack):
    """Set environment variables of functions for one test (like ``sam local --env-vars``)."""
    applied: dict[str, dict[str, str]] = {}

    def set_env(function: str, **variables: str) -> None:
        applied.setdefault(function, {}).update(variables)
        stack.set_overrides(applied)

    yield set_env
    if applied:
        stack.set_overrides({})


sys.path.insert(0, str(ROOT / "tests"))
