"""Operator tools: an HTTP client for the API, the memory-hub command line and an MCP server.
They drive any Memory Hub endpoint, local or deployed; none of it is deployed."""
