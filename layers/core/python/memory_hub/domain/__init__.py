"""The domain: what Memory Hub does, as plain functions of explicit arguments.

Nothing here sees a request: routes hand over the caller's scope and an ``authorize`` callable
(which waits for the key lookup started at the edge and checks role and team), and get back an
answer (a pydantic model of ``results`` / ``results_admin``, which the edge serializes into the
envelope) or a ``DomainError``. Storage is reached only through ``memory_hub.storage``.
"""
