"""Recall by meaning through a stack of its own, with the template's ``Embeddings`` on (as
``make run`` has it); the rest of the API tier's stack has meaning off."""

from __future__ import annotations

import pytest
from helpers import Api, Hooks, checked_stack


@pytest.fixture(scope="package")
def stack():
    """Its teardown checks that no call of the meaning tests was refused by its function's policy."""
    with checked_stack("Enabled") as running:
        yield running


@pytest.fixture(scope="package")
def api(stack) -> Api:
    return Api(stack.api_url, lambda_url=stack.lambda_url)


@pytest.fixture(scope="package")
def hooks(stack) -> Hooks:
    return Hooks(stack.aws_url)
