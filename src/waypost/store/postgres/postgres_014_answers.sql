-- migration 14: the answers queue (answers from Slack and GitHub, `store/answers.py`).
--
-- A request from a service is stored under its own key once it is decided (signed,
-- well-formed), and carried out after, by whichever server claims it. A waypost older than
-- this never reads or writes the table, so the oldest writer taken stays 12.

CREATE TABLE answers (
    key          text PRIMARY KEY,
    source       text NOT NULL,
    run_id       text NOT NULL,
    body         text NOT NULL,
    received_at  timestamptz NOT NULL,
    done         boolean NOT NULL DEFAULT false,
    claimed_by   text,
    claim_until  double precision,
    attempts     integer NOT NULL DEFAULT 0,
    outcome      text,
    done_at      timestamptz
);

CREATE INDEX answers_open ON answers (done, received_at);
