"""The ceiling: a raw ASGI app answering every request with the same fixed bytes, no MCP, no framework.

Served by uvicorn exactly like the other two servers (`bench.raw_app:app`). BENCH_RAW_BODY names a
file holding our server's own answer to the workload and BENCH_RAW_CONTENT_TYPE its content type,
so the bytes on the wire are the ones ours sends. What it reaches is what uvicorn, the kernel and
wrk allow at that size on this machine: no server answering the same bytes can go faster, and
its CPU per request is the part of ours that is not our application.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BODY = Path(os.environ["BENCH_RAW_BODY"]).read_bytes()
HEADERS = [
    (b"content-type", os.environ.get("BENCH_RAW_CONTENT_TYPE", "application/json").encode("latin-1")),
    (b"content-length", str(len(BODY)).encode()),
]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
