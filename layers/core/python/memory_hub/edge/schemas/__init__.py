"""Request models (pydantic, strict: types are checked, never coerced) and the response models
that document each route's ``data`` in the OpenAPI description. Isolation fields are resolved by
the pipeline (body, else headers) and appear in the request models for the documentation only.
Models build their validators on first use (``defer_build``), not at a cold start's import."""
