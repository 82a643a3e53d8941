"""Agent-host hooks (Claude Code, Codex, Gemini CLI, Cursor): the one answer both hook
doors give (`waypost hook` on the command line, `POST /hooks/claude/…` on the server).

    answer.py    the use case: the host's JSON and who calls in, the host's answer out
    decide.py    pure: may the agent stop now, and why (not); what a session is told
    hosts.py     pure: each host's hook JSON read into one call, the answer in its shape
    settings.py  pure: waypost's hooks merged into a host's settings file and taken out
    cap.py       the cap on refused stops in a row: on the run, or in a tally off it
"""
