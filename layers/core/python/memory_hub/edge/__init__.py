"""The edge: everything about HTTP and API Gateway, and nothing else.

``pipeline.handle`` runs the contract's checks in the contract's order (request id, key lookup
started in the background, route and method, body size, encoding, JSON, isolation), the Powertools
resolver validates the body with the route's pydantic model, the route calls one domain function
with explicit arguments, and ``errors`` maps whatever it raises to the envelope — in one place."""
