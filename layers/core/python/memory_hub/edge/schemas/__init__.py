"""Request models (pydantic, strict: types are checked, never coerced); each route's answer is
the domain's type its handler returns (``memory_hub.domain.results``). Isolation fields are resolved by
the pipeline (body, else headers) and appear in the request models for the documentation only.
Models build their validators on first use (``defer_build``), not at a cold start's import."""
