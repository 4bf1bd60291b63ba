"""Where lossless keeps things: the storage seam (``base``), ``open_store`` (``open``), the
PostgreSQL store (``postgres``) and moving a store between the two (``move``)."""

from .open import ENV_STORE, Store, is_database, open_store

__all__ = ["ENV_STORE", "Store", "is_database", "open_store"]
