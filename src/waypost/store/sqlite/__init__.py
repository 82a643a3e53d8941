"""The embedded SQLite backend: one file, WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`.

    store.py    `SqliteStore`: the contract's operations, the read lock, group commit's use
    setup.py    the file and its connection, the migrations, what the driver's errors mean
    checks.py   what doctor checks of the file: its pages, and the disk's free space
    write.py    the one guarded write of events + packet (+ outbox rows), and group commit
    side.py     the operations whose SQL lives in the modules below
    api.py      the change feed a board follows, and bearer tokens
    answers.py  the answers queue: answers from Slack and GitHub until carried out
    keys.py     the signing keys: public halves, holders, validity
    imports.py  runs imported from bundles, with their origin
    outbox.py   the outbox's claims and the relay registry
    watch.py    watcher registrations, due runs, deferred checks and retention
    sqlite.sql  the schema of a fresh store; `sqlite_N_*.sql` the migrations, in order
"""
