"""The API's OpenAPI document and its Markdown reference, both from the code.

``spec``: ``generate()``, the OpenAPI document the service ships (``memory_hub/edge/openapi.json``).
``markdown``: ``reference()``, the same document rendered as Markdown (``docs/API.md``).
Both are deterministic: the same code gives the same text (``memory-hub openapi`` writes them).
"""

from .markdown import REFERENCE_FILE, reference
from .spec import generate

__all__ = ["REFERENCE_FILE", "generate", "reference"]
