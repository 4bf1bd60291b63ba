"""The peer scripts' side of their wire (``_peer_client``): JSON lines on stdin, one answer each on stdout.

    sys.exit(serve(Peer, counter_name))

``{"op": "init", ...}`` makes the peer (``make(request)``); ``{"op": "step", "add": [...]}`` gives it
the messages that entered since the last step; ``{"op": "oneshot", "messages": [...]}`` resets it and
gives it the whole history.  A peer's ``step(messages)`` answers with its view (and, from here, the
step's own wall and CPU seconds, ``"seconds": [wall, cpu]``, the JSON wire left out); a failure is answered
as ``{"error": "<type>: <first line>"}``, which the bench records as the job's error.  Standard
library only: it runs in each peer's own venv.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable


def serve(make: Callable[[dict[str, Any]], Any], counter: str) -> int:
    peer: Any = None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "init":
                peer = make(req)
                reply: dict[str, Any] = {"ok": True, "counter": counter}
            elif peer is None:
                raise RuntimeError("init first")
            elif req["op"] == "step":
                # the peer's own time for the step (its events built, the condenser run), without the wire's
                wall, cpu = time.perf_counter(), time.thread_time()
                reply = peer.step(req["add"])
                reply["seconds"] = [time.perf_counter() - wall, time.thread_time() - cpu]
            elif req["op"] == "oneshot":
                peer.reset()
                reply = peer.step(req["messages"])
            else:
                raise ValueError(f"unknown op {req['op']!r}")
        except Exception as exc:  # reported to the bench, which records the job's error
            reply = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0
