-- migration 15: the public signing keys (`store/keys.py`): what signs a run's bundle.
--
-- Only the public half is kept; the private key lives in an owner-only file or an
-- environment variable. A key is retired, never deleted. A waypost older than this never
-- reads or writes the table, so the oldest writer taken stays 12.

CREATE TABLE signing_keys (
    keyid       text PRIMARY KEY,
    holder      text NOT NULL,
    public_key  text NOT NULL,
    valid_from  timestamptz NOT NULL,
    retired_at  timestamptz
);
