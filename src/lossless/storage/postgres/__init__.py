"""The PostgreSQL store (``pip install 'lossless[postgres]'``): open it with
``lossless.storage.open_store("postgresql://…")``.

* ``connect``     — one shared connection per process, one-line errors naming ``host:port/db``.
* ``schema``      — ordered migrations and ``lossless.schema_version``.
* ``artifacts``   — ``PgArtifactStore``: content-addressed rows, deduplicated.
* ``transcripts`` — ``PgTranscripts`` / ``PgTranscript``: append-only rows per session.
* ``memory``      — ``PgMemoryStore``: memories as rows, full-text search, ``MEMORY.md`` from rows.
* ``consolidate`` — ``PgConsolidator``: the consolidation lock as an advisory lock.

psycopg is imported only when a connection is made.
"""
