"""Replicas of the proxy behind one load balancer share their continuation state through the
PostgreSQL store (``--store postgresql://…``).

After each answered request a replica *publishes* its conversation: the state ``conversations``
parks (the view last forwarded, answer key, handles, pending recall rounds, calibration) as one
artifact, and a row ``(tip, route, tenant, answer) → handle`` in ``lossless.proxy_tips``.  A
request that lands on any replica is matched against that table first (one query over its
chain hashes): when the longest continuation the database knows is longer than any the replica
holds in memory, the replica restores it — so a client alternating between replicas continues
one conversation, forwards the bytes the other replica would have, and never rebuilds from
scratch.  Rows are keyed by tenant and route as the chain is, so tenants never meet here either.

    tips = SharedTips(artifacts.db)        # the PgArtifactStore's Database; the table made once
    tips.publish(tip, "anthropic", tenant, handle, answer)
    tips.longest(hashes, "anthropic", tenant)   # [(k, handle, answer)], longest first
"""

from __future__ import annotations

from typing import Any

__all__ = ["SharedTips", "shared_secret", "shared_tips"]

KEEP_SECONDS = 7 * 24 * 3600
"""Rows older than this are deleted when a replica starts (a week without a request)."""


class SharedTips:
    def __init__(self, db: Any) -> None:
        self.db = db
        with db.transaction("make the proxy's continuation table") as cur:
            cur.execute("CREATE SCHEMA IF NOT EXISTS lossless")
            cur.execute("CREATE TABLE IF NOT EXISTS lossless.proxy_tips ("
                        " tip bytea NOT NULL, route text NOT NULL, tenant text NOT NULL, handle text NOT NULL,"
                        " answer bytea, at timestamptz NOT NULL DEFAULT now(),"
                        " PRIMARY KEY (tip, route, tenant, handle))")
            cur.execute("DELETE FROM lossless.proxy_tips WHERE at < now() - make_interval(secs => %s)",
                        (KEEP_SECONDS,))

    def publish(self, tip: bytes, route: str, tenant: str, handle: str, answer: bytes | None) -> None:
        with self.db.transaction("publish a proxy conversation") as cur:
            cur.execute("INSERT INTO lossless.proxy_tips (tip, route, tenant, handle, answer) VALUES (%s,%s,%s,%s,%s)"
                        " ON CONFLICT (tip, route, tenant, handle) DO UPDATE SET answer = EXCLUDED.answer,"
                        " at = now()", (tip, route, tenant, handle, answer))

    def longest(self, hashes: list[bytes], route: str, tenant: str) -> list[tuple[int, str, bytes | None]]:
        """``(k, handle, answer)`` of every published conversation whose tip is one of ``hashes``
        (``hashes[k - 1]``), the longest and then the most recent first."""
        if not hashes:
            return []
        position = {h: i + 1 for i, h in enumerate(hashes)}
        with self.db.cursor("find a proxy conversation") as cur:
            cur.execute("SELECT tip, handle, answer FROM lossless.proxy_tips WHERE route = %s AND tenant = %s"
                        " AND tip = ANY(%s) ORDER BY at DESC", (route, tenant, list(hashes)))
            rows = cur.fetchall()
        found = [(position[bytes(tip)], handle, bytes(answer) if answer is not None else None)
                 for tip, handle, answer in rows]
        return sorted(found, key=lambda row: -row[0])


def shared_tips(artifacts: Any) -> SharedTips | None:
    """The shared index when ``artifacts`` is a PostgreSQL store's; None for a directory store."""
    db = getattr(artifacts, "db", None)
    return SharedTips(db) if db is not None else None


def shared_secret(artifacts: Any) -> bytes | None:
    """The key of the tenant hash for every replica on a PostgreSQL store (made once, kept in
    ``lossless.proxy_key``): replicas must name a tenant alike, or their chains never meet.
    None for a directory store (its ``proxy.key`` file does the same)."""
    import secrets

    db = getattr(artifacts, "db", None)
    if db is None:
        return None
    with db.transaction("read the proxy's tenant key") as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS lossless")
        cur.execute("CREATE TABLE IF NOT EXISTS lossless.proxy_key (id int PRIMARY KEY CHECK (id = 1), key bytea NOT NULL)")
        cur.execute("INSERT INTO lossless.proxy_key (id, key) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                    (secrets.token_bytes(32),))
        cur.execute("SELECT key FROM lossless.proxy_key WHERE id = 1")
        return bytes(cur.fetchone()[0])
