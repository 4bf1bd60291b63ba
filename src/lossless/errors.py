"""Every error lossless raises, in one tree.

    LosslessError
    ├── InputError                 bad input: names the file, line, message index or id
    │   ├── FormatError            a file is not in the expected format
    │   └── InvalidRequest         a message list the API would reject (validate())
    ├── StoreError                 the .lossless store (artifacts, transcript, memory)
    │   ├── HandleNotFound         recall() of a handle the store does not hold
    │   │   └── AmbiguousHandle    a short handle more than one artifact starts with
    │   └── MemoryError_           a memory file or operation (bad frontmatter, traversal)
    ├── ConfigError                an unknown or impossible configuration value
    ├── CompactionError            a summary that cannot be used (never replaces history)
    └── ProviderError              a model call failed
        ├── ContextTooLong         the request exceeded the model's window (carries the numbers)
        ├── RateLimited            429, with retry_after
        ├── Overloaded             529 / 503, with retry_after
        ├── ProviderHTTPError      another HTTP status
        ├── ProviderConnectionError  no answer (refused, reset, timeout)
        └── ProviderUnavailable    a side call skipped, no request sent: the provider is failing

Messages are one line and say what to do.  Constructing an error never logs and
never does I/O.
"""

from __future__ import annotations


class LosslessError(Exception):
    """Base of every error lossless raises on purpose."""


class InputError(LosslessError):
    pass


class FormatError(InputError):
    pass


class InvalidRequest(InputError):
    """A message list the provider would reject. ``index`` and ``tool_id`` locate it."""

    def __init__(self, message: str, *, index: int | None = None, tool_id: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.tool_id = tool_id


class StoreError(LosslessError):
    pass


class HandleNotFound(StoreError):
    pass


class AmbiguousHandle(HandleNotFound):
    """A short handle that more than one artifact of the store starts with."""


class MemoryError_(StoreError):
    """A memory file or memory operation failed (named with a trailing underscore so
    it does not shadow the builtin ``MemoryError``)."""


class ConfigError(LosslessError):
    pass


class CompactionError(LosslessError):
    pass


class ProviderError(LosslessError):
    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ContextTooLong(ProviderError):
    """The provider said the prompt does not fit. ``tokens``/``limit`` when it said them."""

    def __init__(
        self,
        message: str,
        *,
        tokens: int | None = None,
        limit: int | None = None,
        status: int | None = 400,
    ) -> None:
        super().__init__(message, status=status)
        self.tokens = tokens
        self.limit = limit


class RateLimited(ProviderError):
    pass


class Overloaded(ProviderError):
    pass


class ProviderHTTPError(ProviderError):
    pass


class ProviderConnectionError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    """lossless skipped one of its own side calls (notes, memory, summaries) without
    sending it, because the provider failed transiently and has not answered since."""
