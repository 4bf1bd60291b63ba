"""The bench's pass-through: the proxy's stack (uvicorn + httpx2) with no pipeline — each
request's bytes forwarded untouched and the answer streamed back as it arrives.  What a
user runs without lossless, if they run a proxy at all.  ``python _proxy_passthrough.py
UPSTREAM`` prints its URL."""

from __future__ import annotations

import socket
import sys

import httpx2 as httpx
import uvicorn

UPSTREAM = sys.argv[1]
DROP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"accept-encoding"}
client = httpx.AsyncClient(base_url=UPSTREAM, timeout=None)


async def app(scope, receive, send):  # noqa: ANN001 - ASGI
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in DROP]
    request = client.build_request(scope["method"], scope["path"], content=b"".join(chunks), headers=headers)
    response = await client.send(request, stream=True)
    await send({"type": "http.response.start", "status": response.status_code,
                "headers": [(k.encode(), v.encode()) for k, v in response.headers.items()
                            if k.lower().encode() not in DROP]})
    async for chunk in response.aiter_raw():
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await response.aclose()
    await send({"type": "http.response.body", "body": b""})


if __name__ == "__main__":
    # Naming IPPROTO_TCP lets asyncio set TCP_NODELAY on accepted connections (as the proxy does).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
