"""``portamem serve``: the memory as an HTTP service (needs the ``server`` extra: fastapi, uvicorn, httpx).

``app.create_app`` builds the FastAPI application, ``auth`` holds the API keys (and their cache),
``limits`` the Host allow-list and body limit in front of every route, ``metrics`` ``/metrics``,
``queue`` the write queue with group commit, ``mcp`` the MCP server, ``inspector`` (with ``pages``)
the memory inspector at ``/ui``; ``commands`` adds them to the CLI.
"""
