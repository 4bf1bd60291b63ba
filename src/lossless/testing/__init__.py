"""Test doubles that ship with lossless: a scripted provider and a fake HTTP server.

``FakeProvider`` stands in for any ``Provider`` in unit tests (it writes a summary
or session notes when asked for them); ``FakeServer`` speaks
the Anthropic and OpenAI wire APIs on 127.0.0.1 so the real SDKs can be tested
through ``base_url`` (``python -m lossless.testing serve`` runs one from a shell).
"""

from __future__ import annotations

from .fake_provider import FakeProvider
from .notes import build_notes
from .server import FakeServer, Faults, RecordedRequest, Responder
from .summaries import SECTIONS, build_summary

__all__ = sorted(["SECTIONS", "FakeProvider", "FakeServer", "Faults", "RecordedRequest", "Responder", "build_notes",
                  "build_summary"])
