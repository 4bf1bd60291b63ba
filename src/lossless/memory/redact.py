"""Secrets never reach a memory file.

``redact(text)`` replaces values that look like credentials with
``[REDACTED:<kind>]``: provider API keys, access tokens, JWTs, private-key
blocks, AWS secret access keys near an AWS context, Slack webhook URLs,
SendGrid keys, Azure ``AccountKey=`` values, netrc ``password`` entries,
passwords in URLs, ``Authorization: Bearer`` values and
``password=``/``api_key:``-style assignments.  The shapes are hand-written from
the public facts of each provider's token format (the core stays stdlib-only).
The store calls it on everything it writes, so the memory tool, the CLI and
extraction are all covered.

Text is matched NFKC-normalised and without invisible characters (zero-width
spaces and joiners, soft hyphens, bidi marks, variation selectors), so a key
split by a zero-width space or typed in full-width letters is still found.  A
text with no secret comes back unchanged; a text with one comes back normalised
with the secret replaced.

Invariants (property-tested): a planted secret never survives, and
``redact(redact(x)) == redact(x)``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Callable, Mapping

_MARK = "[REDACTED:{}]"

# Order matters: whole blocks first, then specific token shapes, then generic forms.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----.*?(?:-----END[A-Z ]{0,40}PRIVATE KEY-----|\Z)", re.S
        ),
    ),
    ("slack-webhook", re.compile(
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+\-]{8,}")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}")),
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
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,1024}+\.eyJ[A-Za-z0-9_\-]{8,16384}+\.[A-Za-z0-9_\-]{8,}")),
)
# scheme://user:password@host -> the password only (the user may be empty: redis://:pw@host).
# Every repetition that can fail afterwards is bounded or possessive: a hostile text
# ("a-a-a-…") must cost linear time, never a scan to its end from each position.
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.\-]{0,31}+://[^\s:/@]*+:)(?P<secret>[^\s@/]++)(?=@)")
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9_\-.=+/]{16,})")
_NETRC = re.compile(
    r"(?P<head>\b(?:machine\s+\S+|default)(?:\s+(?:login|account|port|protocol)\s+\S+){0,6}\s+password\s+)"
    r"(?P<secret>\S+)"
)
_AZURE = re.compile(r"(?P<head>\b(?:AccountKey|SharedAccessKey)\s*=\s*)(?P<secret>[A-Za-z0-9+/=]{16,})", re.I)
# An AWS secret access key is 40 base64 characters with no marker of its own: it is
# taken as one only near an AWS context (the word, or an access key id, even redacted).
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_CONTEXT = re.compile(r"aws|amazon|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|REDACTED:aws-key", re.I)
_AWS_NEAR = 200
# "password = x", "api_key: 'x'", "DB_PASSWORD=x": the key (around a keyword) and its value.
_ASSIGN_HEAD = re.compile(
    r"(?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|pwd|access[_\-]?key)[A-Za-z0-9_\-]{0,64}+"
    r"[\"']?\s*+[:=]\s*+[\"']?",
    re.I,
)
_VALUE_END = re.compile(r"[\s\"',;]")
_NEXT_KEY = re.compile(r"\s*+[:=]")


_NUMBER = re.compile(r"[0-9][0-9_.,]*")
_SECRET_KEY = re.compile(r"passw|pwd|secret|key", re.I)


Found = list[tuple[str, str]]
"""(kind, value) of every secret a pass replaced."""


def _keep_head(kind: str, found: Found) -> Callable[[re.Match[str]], str]:
    mark = _MARK.format(kind)

    def sub(m: re.Match[str]) -> str:
        value = m.group("secret")
        if value.startswith("[REDACTED"):
            return m.group(0)
        found.append((kind, value))
        return m.group("head") + mark

    return sub


def _whole(kind: str, found: Found) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        found.append((kind, m.group(0)))
        return _MARK.format(kind)

    return sub


def _aws_secret(text: str, found: Found) -> str:
    def sub(m: re.Match[str]) -> str:
        value = m.group(0)
        random_looking = (any(c.isupper() for c in value) and any(c.islower() for c in value)
                          and any(c.isdigit() or c in "/+" for c in value))
        near = text[max(0, m.start() - _AWS_NEAR): m.end() + _AWS_NEAR]
        if not (random_looking and _AWS_CONTEXT.search(near)):
            return value
        found.append(("aws-secret-key", value))
        return _MARK.format("aws-secret-key")

    return _AWS_SECRET.sub(sub, text)


# Characters that render as nothing: zero-width space/joiners, soft hyphen, bidi and
# other format marks, invisible fillers, variation selectors, tag characters.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U0001bca0-\U0001bca3\U000e0000-\U000e0fff]"
)


def visible(text: str) -> str:
    """``text`` NFKC-normalised, without invisible characters: what a secret is matched against."""
    if text.isascii():
        return text
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


# Every shape above needs one of these words or marks (its prefix, its keyword, or, for an
# AWS secret key, its context): a plain-ASCII text with none of them has no secret, and is
# answered after one search instead of twenty substitutions.  Non-ASCII text always takes
# the full path (normalisation can make a marker appear).
_TRIGGER = re.compile(
    r"BEGIN|hooks\.slack|SG\.|sk-|k_(?:live|test)_|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|xox|AIza|hf_|npm_"
    r"|pypi-|eyJ|://|bearer|basic|token|passw|pwd|secret|api|access|accountkey|aws|amazon|REDACTED",
    re.I,
)


_TRIGGERS = (
    "begin", "hooks.slack", "sg.", "sk-", "k_live_", "k_test_", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "github_pat_", "glpat-", "xox", "aiza", "hf_", "npm_", "pypi-", "eyj", "://", "bearer", "basic",
    "token", "passw", "pwd", "secret", "api", "access", "accountkey", "aws", "amazon", "redacted")
"""``_TRIGGER``'s words in lower case: for an ASCII text, one of them is in its lower-cased form exactly when
``_TRIGGER`` finds one (``tests/test_memory_secrets.py``), and a substring test for each is ten times
faster than that case-blind alternation (84 µs for a 600-character memory)."""


def _triggered(ascii_text: str) -> bool:
    low = ascii_text.lower()
    return any(word in low for word in _TRIGGERS)


def redact(text: str) -> str:
    """``text`` with every credential-looking value replaced by ``[REDACTED:<kind>]``.

    Matched on the visible form, where a zero-width character can no longer split
    a key.  When the text had invisible characters, the secrets found in the text
    as given are also removed from the result: there an invisible character may
    be what separated a key from the word before it (``x\u200bsk-ant-…``).
    Unchanged unless a secret is found.
    """
    if not text or (text.isascii() and not _triggered(text)):
        return text
    clean = visible(text)
    out = _redact_plain(clean, [])
    if clean != text:
        raw: Found = []
        _redact_plain(text, raw)
        for kind, value in raw:
            value = visible(value)
            if len(value) >= 6 and value in out:
                out = out.replace(value, _MARK.format(kind))
    return text if out == clean else out


def _redact_plain(text: str, found: Found) -> str:
    for kind, pattern in _PATTERNS:
        text = pattern.sub(_whole(kind, found), text)
    text = _aws_secret(text, found)
    text = _NETRC.sub(_keep_head("password", found), text)
    text = _AZURE.sub(_keep_head("azure-key", found), text)
    text = _URL_PASSWORD.sub(_keep_head("password", found), text)
    text = _BEARER.sub(_keep_head("token", found), text)
    return _assignments(text, found)


def _key_at(text: str, m: re.Match[str]) -> str:
    """The whole key around the keyword ``m`` found ("max_tokens: " for "tokens: ")."""
    i = m.start()
    while i > 0 and m.start() - i < 64 and (text[i - 1].isalnum() or text[i - 1] in "_-"):
        i -= 1
    return text[i: m.end()]


def _assignments(text: str, found: Found) -> str:
    """Redact the value of every ``key = value`` whose key names a secret.

    A value that is itself a secret's key followed by ``=`` or ``:`` is the next key
    ("password: api_key = x"), so it is skipped and that key's value is redacted
    instead; any other value is redacted, whatever follows it ("pwd = s3cret :").  Written as a scan
    (not one regex) so that many keys inside one long token cost linear time: the
    end of a token is found once, whichever key inside it asks.
    """
    out: list[str] = []
    done = token_start = token_end = 0
    next_key = False
    for m in _ASSIGN_HEAD.finditer(text):
        start = m.end()
        if m.start() < done:
            continue
        if not token_start <= start < token_end:
            end = _VALUE_END.search(text, start)
            token_start, token_end = start, (end.start() if end else len(text))
            next_key = _NEXT_KEY.match(text, token_end) is not None and _ASSIGN_HEAD.match(text, start) is not None
        value = text[start:token_end]
        if len(value) < 6 or value.startswith("[REDACTED") or next_key:
            continue
        # "max_tokens: 200000" is a setting, not a credential; a numeric password is still a password.
        if _NUMBER.fullmatch(value) and not _SECRET_KEY.search(_key_at(text, m)):
            continue
        found.append(("secret", value))
        out.append(text[done:start] + _MARK.format("secret"))
        done = token_end
    return "".join(out) + text[done:] if out else text


def contains_secret(text: str) -> bool:
    return redact(text) != text


def redact_mapping(mapping: Mapping[Any, Any]) -> dict[str, Any]:
    """Frontmatter with keys and values redacted; a value is matched after its key
    (``password: hunter2``).  Two keys that redact alike are both kept."""
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        key = redact(str(k))
        while key in out:
            key += "_"
        out[key] = _redact_value(v, key)
    return out


def _redact_value(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return redact_mapping(value)
    if isinstance(value, list):
        return [_redact_value(v, key) for v in value]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        head = f"{key}: "
        text = redact(head + str(value))
        if text == head + str(value):
            return redact(value) if isinstance(value, str) else value
        return text[len(head):] if text.startswith(head) else redact(str(value))
    return value
