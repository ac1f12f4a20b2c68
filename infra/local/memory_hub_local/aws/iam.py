"""Who signed a request to the emulated AWS side and what IAM lets them do: each function of the
template is held to its own policy (from the template, SAM-expanded, with the parameters the stack
was started with), the operator to none; a refusal is AccessDenied as each service words it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import bedrock, faithful, s3vectors
from .shapes import Call, Refusal

if TYPE_CHECKING:
    from .state import State


class Identity:
    """Who signed a request: a function of the template (restricted to its policy) or an operator."""

    def __init__(self, name: str | None, allows: Callable[[str, str], bool] | None) -> None:
        self.name, self._allows = name, allows

    def allows(self, action: str, resource: str) -> bool:
        return self._allows is None or self._allows(action, resource)


OPERATOR = Identity(None, None)


def with_parameters(
    identities: dict[str, Identity], state: State, region: str, parameters: dict[str, str]
) -> dict[str, Identity]:
    """The functions' identities with their IAM policies as the given template parameters make them
    (``Formation=Enabled`` grants FormationFunction its model; ``Embeddings=Disabled`` takes the
    embedding model away). A function held to no policy (``--no-iam``) stays so."""
    from ..template import deploy

    functions = deploy(region, state.secret_arns, parameters).functions
    return {
        key: Identity(i.name, functions[i.name].allows) if i.name in functions and i._allows is not None else i
        for key, i in identities.items()
    }


def denied(call: Call, identity: Identity, action: str, resource: str) -> Refusal:
    message = (
        f"User: arn:aws:sts::123456789012:assumed-role/{identity.name}Role/{identity.name} is not "
        f"authorized to perform: {action} on resource: {resource} because no identity-based policy "
        f"allows the {action} action"
    )
    if call.service == "s3":
        return faithful.s3_error("AccessDenied", message, 403)
    if call.service in ("bedrock", "s3vectors"):
        return (bedrock.error if call.service == "bedrock" else s3vectors.error)("AccessDeniedException", message, 403)
    body = json.dumps({"__type": "com.amazon.coral.service#AccessDeniedException", "Message": message}).encode()
    return Refusal(
        400, body, "application/x-amz-json-1.0", {"x-amzn-ErrorType": "AccessDeniedException"}, "AccessDeniedException"
    )


def authorize(call: Call, identity: Identity) -> None:
    """Each action the request needs, on its resource, allowed by the caller's policy: the first
    that is not is refused."""
    for action, resource in call.actions:
        if not identity.allows(action, resource):
            raise denied(call, identity, action, resource)
