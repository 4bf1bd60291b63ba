"""The agent's own request, streamed: a provider wrapper that sends the chat's model call as a
stream when someone is listening, and everything else as it was.

    streaming = Streaming(provider)
    cm = ContextManager(..., provider=streaming)     # side calls (summaries, memory) pass through
    streaming.listen(show)                           # the chat's next request streams to show(delta)
    response = cm.provider.send(request)             # still the complete Response, usage included
    streaming.listen(None)

The manager's ``MeteredProvider`` keeps its turn and retry bookkeeping: it still calls
``complete`` and gets the whole ``Response``; only the deltas on their way are seen early.
Lossless's own calls are never shown: only a request whose ``purpose`` is "chat" streams
(the summariser's, the memory's and the notes' requests say what they are for), and only
while ``listen`` has a listener.  A provider that cannot stream answers whole.
"""

from __future__ import annotations

from typing import Any, Callable

from ..providers.base import Provider, Request, Response

Listener = Callable[[str], None]


class Streaming:
    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._listener: Listener | None = None

    def listen(self, listener: Listener | None) -> None:
        self._listener = listener

    def complete(self, request: Request) -> Response:
        listener, stream = self._listener, getattr(self.provider, "stream", None)
        if listener is None or stream is None or request.purpose != "chat":
            return self.provider.complete(request)
        deltas = stream(request)
        try:
            while True:
                try:
                    delta = next(deltas)
                except StopIteration as done:
                    response: Response = done.value
                    return response
                listener(delta)
        finally:
            deltas.close()  # on Ctrl-C: the connection is closed now, not when the generator is collected

    def __getattr__(self, name: str) -> Any:  # retry, count_tokens, close: the wrapped provider's
        return getattr(self.provider, name)
