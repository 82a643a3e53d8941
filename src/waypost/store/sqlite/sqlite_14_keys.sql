-- migration 14: the public signing keys (`store/keys.py`): what signs a run's bundle.
--
-- Only the public half is kept; the private key lives in an owner-only file or an
-- environment variable. A key is retired, never deleted. A waypost older than this never
-- reads or writes the table, so the oldest writer taken stays 11.

CREATE TABLE signing_keys (
    keyid       TEXT PRIMARY KEY,           -- sha256 of the raw Ed25519 public key (hex)
    holder      TEXT NOT NULL,
    public_key  TEXT NOT NULL,              -- PEM
    valid_from  TEXT NOT NULL,
    retired_at  TEXT
) WITHOUT ROWID;
