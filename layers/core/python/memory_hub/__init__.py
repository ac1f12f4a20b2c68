"""Memory Hub shared core: settings, edge pipeline, logic and data access.

Shipped as the Lambda layer ``layers/core``; every function imports from here.
"""
