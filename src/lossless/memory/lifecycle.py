"""When consolidation runs: the end of a session, in the background.

Use (``ContextManager.close()`` does this for you)::

    thread = session_ended(store, provider)   # None when nothing can run
    ...                                       # the caller goes on: nothing here blocks a model call
    thread and thread.join()                  # only a test or a short-lived script needs to wait

The gates (``consolidate.Consolidator.gate``: 24 h since the last run, 5 sessions
since, one check per 10 minutes per process, the consolidation lock) are checked
in a worker thread, and only when they all open does the model run — unattended,
so ``user`` and ``feedback`` memories are only ever *suggested* for change
(``lossless memory suggestions``).  The thread is not a daemon: a process that
ends right after its session waits for a started consolidation rather than
leaving it half-applied.  Any failure is kept in ``last_result``/``last_error``,
never raised into the caller.
"""

from __future__ import annotations

import threading
from typing import Any

from ..providers.base import Provider
from .consolidate import ConsolidationConfig, ConsolidationResult, Consolidator

_consolidators: dict[str, Consolidator] = {}
_guard = threading.Lock()
_running: dict[str, threading.Thread] = {}
last_result: dict[str, ConsolidationResult | None] = {}
last_error: dict[str, str] = {}


def consolidator_for(store: Any, provider: Provider, config: ConsolidationConfig | None = None) -> Consolidator:
    """One ``Consolidator`` per store directory and process, so its 10-minute throttle holds
    across the sessions a process runs."""
    key = str(store.dir.resolve())
    with _guard:
        c = _consolidators.get(key)
        if c is None:
            make = getattr(store, "consolidator_class", Consolidator)  # a database store locks its own way
            c = _consolidators[key] = make(store, provider, config=config)
        c.store, c.provider = store, provider
        return c


def session_ended(store: Any, provider: Provider | None, *, config: ConsolidationConfig | None = None
                  ) -> threading.Thread | None:
    """Check the consolidation gates for ``store`` in a background thread (started and returned).

    First the session's use times are written to ``.usage.json`` (``flush_usage``).
    Nothing more happens (None) without a provider, or while a check for the same
    store is still running in this process.
    """
    if store is None:
        return None
    try:
        store.flush_usage()  # the session's use times reach .usage.json
    except Exception as exc:  # a locked or tampered store: named by its own commands, never raised here
        last_error[str(store.dir.resolve())] = f"{type(exc).__name__}: {exc}"
    if provider is None:
        return None
    c = consolidator_for(store, provider, config)
    key = str(store.dir.resolve())
    with _guard:
        running = _running.get(key)
        if running is not None and running.is_alive():
            return None

        def work() -> None:
            try:
                last_result[key] = c.maybe_run()
                last_error.pop(key, None)
            except Exception as exc:  # a locked or tampered store, a full disk: never the caller's problem
                last_error[key] = f"{type(exc).__name__}: {exc}"

        thread = threading.Thread(target=work, name="lossless-consolidate", daemon=False)
        _running[key] = thread
        thread.start()
    return thread
