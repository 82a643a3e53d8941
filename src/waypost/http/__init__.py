"""The HTTP API, its bearer tokens, the live web board and the host-hook endpoint (an
adapter over the use cases, like `waypost.cli`; it maps the exception root to HTTP statuses
in one place, `waypost.http.errors`). `waypost serve` starts it (`waypost.http.app`).

    app.py           the ASGI application over one store
    operations.py    every operation, as a function of store, grant and settings
    api_runs.py api_commands.py api_files.py api_hooks.py   the JSON API's routes
    shapes.py        the request bodies and answers; errors.py the one status map
    auth.py          the bearer token made a grant, and where a token may come from
    edge.py          the token routes' guard: token, media type, size and nesting first
    deps.py          the handlers' dependencies
    board.py board_views.py board_render.py board_session.py   the web board
    board_story.py   the run page's words: events as sentences, badges, safe Markdown
    board_links.py   an emailed link's page, its one use, and its session's end
    stream.py        the board's live feed (server-sent events)
    github_hooks.py  GitHub's webhook: `/waypost` commands on a run's thread, signed
    answering.py     the thread carrying out answers from Slack and GitHub, and the hand-over
    slack_actions.py slack_replies.py   answers from Slack's buttons, and the message updated
    docs.py          the browsable API reference; settings.py what `serve` was told
"""
