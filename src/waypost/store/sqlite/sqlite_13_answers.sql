-- migration 13: the answers queue (answers from Slack and GitHub, `store/answers.py`).
--
-- A request from a service is stored under its own key once it is decided (signed,
-- well-formed), and carried out after, by whichever server claims it. A waypost older than
-- this never reads or writes the table, so the oldest writer taken stays 11.

CREATE TABLE answers (
    key          TEXT PRIMARY KEY,          -- the service's request: slack:…, github:DELIVERY
    source       TEXT NOT NULL,             -- slack | github
    run_id       TEXT NOT NULL,
    body         TEXT NOT NULL,             -- the answer as accepted (JSON)
    received_at  TEXT NOT NULL,
    done         INTEGER NOT NULL DEFAULT 0,
    claimed_by   TEXT,
    claim_until  REAL,                      -- epoch seconds: the claim ends then
    attempts     INTEGER NOT NULL DEFAULT 0,
    outcome      TEXT,                      -- what it came to (JSON), once done
    done_at      TEXT
) WITHOUT ROWID;

CREATE INDEX answers_open ON answers (done, received_at);
