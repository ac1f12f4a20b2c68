"""Recall by meaning through a stack of its own, with the template's ``Embeddings`` on (as
``make run`` has it): these tests run before the rest of the API tier, whose stack has meaning off."""

from __future__ import annotations

import pytest
from helpers import Api, Hooks, local_stack


@pytest.fixture(scope="package")
def stack():
    yield from local_stack("Enabled")


@pytest.fixture(scope="package")
def api(stack) -> Api:
    return Api(stack.api_url, lambda_url=stack.lambda_url)


@pytest.fixture(scope="package")
def hooks(stack) -> Hooks:
    return Hooks(stack.aws_url)
