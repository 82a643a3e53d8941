"""The use cases: what every door calls. A door (CLI, SDK, MCP, HTTP, board, hooks) reads
its input, calls one function or `Run` verb here, and renders the answer; the rules
themselves are the core's, and every write goes through `core.history.prepare` and the
store's one write primitive.

    starting.py  start a run: its parameters decided once, then the `Started` event
    fields.py    a request's text within its limits, and its target URIs' syntax
    runs.py      `Run`: every verb that happens to a run once started (claim, heartbeat,
                 block, unblock, artifacts, evidence, ready, review, approve, changes,
                 transfer, cancel, resume, retarget, add_gate, adopt_gate)
    artifacts.py recording files and bytes as artifacts, fetching them back, bounded
    evidence.py  running a command under bounds, and the evidence record made from it
    checks.py    the built-in checks (artifact, grep, no-private, http, command)
    substance.py whether an artifact holds real content
    scanning.py  scanning files for private identifiers (the sanitizer's reading part)
    review.py    the owner's review: every gate re-run, recorded as `rechecked` evidence
    approval.py  approve and changes bound to the reviewed-result digest they answer
    gates.py     gates added after the start, and adopted by the owner
    handoff.py   resume: a takeover of a silent worker, and the brief for the new one
    retarget.py  the owner changes where the result goes, before delivery
    beats.py     heartbeats sent on a busy worker's behalf
    watchdog.py  the watchdog's sweeps, and a watcher's registration and lease
    tokens.py    bearer tokens for the authenticated doors
    links.py     an emailed link used: its owner signed in to its run, once
    inbox.py     an owner's inbox: news of its runs, shown once, kept until acknowledged
    answers.py   answers from Slack and GitHub: accepted at once, carried out after, once,
                 as the mapped actor, each bound to the reviewed result
    views.py     packets with their observed view, for every reader
    reading.py   the read model: a run, its events and artifacts as their reader may see them
    previews.py  artifacts previewed and diffed, evidence logs: for a reader who sees all
    a2a.py       a packet as an A2A v1 Task
    waiting.py   `wait`: runs followed on the store's change cursor, one follower per store
    github_answers.py  a `/waypost` command on GitHub decided into an answer, its reply
    commands.py  a refusal's next step as the `waypost` command line a shell user types
    keys.py      signing keys: made, listed, exported as a keyring, retired, loaded to sign
    bundles.py   `export`: a run as one signed tar, streamed blob by blob
    verifying.py `verify-bundle`: a bundle checked with no store, the first break named
    imports.py   `import`: a verified bundle stored as a read-only run, with its origin
    cosign.py    `approve --sign`: the approval co-signed with the approver's own key
"""
