"""The rules, pure: no I/O, no clock, no store. Everything here is a function of a packet,
an event and the moments passed in, so it is tested without a database.

    moves.py      the transition table: which move each state allows, and where it leads
    authority.py  who may make each move (owner, fenced worker, transferee, watchdog, relay)
    machine.py    apply(packet, event) -> packet, and fold(events)
    growing.py    evidence appended in constant time while a fold runs
    gates.py      what a review records and whether the run may be approved
    reviewed.py   the reviewed-result digest an answer names, and what changed since
    outbox.py     which deliveries an event causes
    writes.py     what a write is: snapshot, events + packet + outbox rows, deferral
    history.py    the hash chain: building events, deciding a write, verifying a run
    due.py        liveness and the moments the watchdog must act on
    watching.py   what a watchdog records, and when it looks again
    observed.py   the observed view: liveness, watch coverage, delivery, in words
    waiting.py    what a parent waits for (what needs the parent), and how a wait ends
    inbox.py      which events are news for a run's owner (the inbox's items)
    statement.py  a run's in-toto statement: subjects and its checkpoint predicate
    signing.py    Ed25519 keys and DSSE envelopes (the one module that loads cryptography)
    cosigned.py   the owner's signed approval statement (`approve --sign`)

    access.py     what a bearer token's role lets its holder ask for
    readers.py    what each reader of a run sees (everything, or the public view)
    exposure.py   what a remote caller may make the server run, read or reach
    targets.py    what a target or notify URI may be
    links.py      the signed link a ready-for-review mail carries: made, and read back
    receipts.py   what a sent delivery's receipt says
    sanitize.py   private identifiers found and redacted; sanitize_rules.py their patterns
"""
