"""Fixtures of every tier. The API tier's stack is the one ``make run`` starts — the emulated AWS
side in its own process, each function in its own, API Gateway in front — on free ports, with
nothing kept on disk and the test hooks of the AWS side on. One stack serves the whole session;
tests isolate themselves with fresh team/agent ids (``scope``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers import Api, Hooks, Scope, checked_stack, make_scope

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="session")
def stack():
    """The API tier's stack. Meaning is off here — every write would otherwise embed through the
    emulated Bedrock, which dominates the tier's time; tests/api/meaning/ has a stack with it on.
    Its teardown checks that no function call of the session was refused by the function's policy."""
    with checked_stack("Disabled") as running:
        yield running


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


@pytest.fixture(autouse=True)
def _aws_environment_of_this_tests_stack(request):
    """boto3 in a test (``helpers.aws_client``, ``scan``, ``s3_keys``, plain ``boto3.client``) talks
    to the stack the test runs on, whatever other stacks this process started before it: a stack's
    start points the environment at it and its stop puts back what was there, which is right only
    when stacks nest — the meaning package's stack and the modules' own are not torn down in
    order when the API tier runs its modules in several processes."""
    if "stack" in request.fixturenames:
        stack = request.getfixturevalue("stack")
        if os.environ.get("AWS_ENDPOINT_URL") != stack.aws_url:
            import boto3

            os.environ.update(stack.aws_environment())
            boto3.DEFAULT_SESSION = None  # clients made from here on resolve this stack's credentials


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
