"""The PostgreSQL backend, for many hosts sharing one store: psycopg 3 and a pool. Needs
the `postgres` extra; nothing imports this package unless a `postgresql://` URL is opened.

    store.py      `PostgresStore`: the contract's operations, each one short transaction
    setup.py      the URL, the schema, the migrations
    live.py       LISTEN/NOTIFY change notifications and the sweeper's advisory lock
    side.py       the operations whose SQL lives in the modules below
    api.py        the change feed a board follows, and bearer tokens
    answers.py    the answers queue: answers from Slack and GitHub until carried out
    keys.py       the signing keys: public halves, holders, validity
    imports.py    runs imported from bundles, with their origin
    outbox.py     the outbox's claims (`FOR UPDATE SKIP LOCKED`) and the relay registry
    watch.py      watcher registrations, due runs, deferred checks and retention
    postgres.sql  the schema of a fresh store; `postgres_NNN_*.sql` the migrations, in order
"""
