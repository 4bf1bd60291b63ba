"""Secrets never reach a memory file.

``redact(text)`` replaces values that look like credentials with
``[REDACTED:<kind>]``: provider API keys, access tokens, JWTs, private-key
blocks, passwords in URLs, ``Authorization: Bearer`` values and
``password=``/``api_key:``-style assignments.  The store calls it on every field
it writes, so the memory tool, the CLI and extraction are all covered.

Invariants (property-tested): a planted secret never survives, and
``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import re

_MARK = "[REDACTED:{}]"

# Order matters: whole blocks first, then specific token shapes, then generic forms.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.S
        ),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("stripe-key", re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("google-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{50,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
)
# scheme://user:password@host -> the password only (the user may be empty: redis://:pw@host).
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)(?P<secret>[^\s@/]+)(?=@)")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9_\-.=+/]{16,})")
_ASSIGN = re.compile(
    r"(?P<head>\b[A-Za-z0-9_\-]*(?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|pwd|access[_\-]?key)"
    r"[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*[\"']?)(?P<secret>[^\s\"',;]{6,})",
    re.I,
)


_NUMBER = re.compile(r"[0-9][0-9_.,]*")
_SECRET_KEY = re.compile(r"passw|pwd|secret|key", re.I)


def _keep_head(kind: str):
    mark = _MARK.format(kind)

    def sub(m: re.Match[str]) -> str:
        value = m.group("secret")
        if value.startswith("[REDACTED"):
            return m.group(0)
        # "max_tokens: 200000" is a setting, not a credential; a numeric password is still a password.
        if kind == "secret" and _NUMBER.fullmatch(value) and not _SECRET_KEY.search(m.group("head")):
            return m.group(0)
        return m.group("head") + mark

    return sub


def redact(text: str) -> str:
    """``text`` with every credential-looking value replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for kind, pattern in _PATTERNS:
        text = pattern.sub(_MARK.format(kind), text)
    text = _URL_PASSWORD.sub(_keep_head("password"), text)
    text = _BEARER.sub(_keep_head("token"), text)
    text = _ASSIGN.sub(_keep_head("secret"), text)
    return text


def contains_secret(text: str) -> bool:
    return redact(text) != text
