"""Agent-host hooks (Claude Code, Codex, Gemini CLI, Cursor): the use case both hook doors
call (`waypost hook` on the command line, `POST /hooks/…` on the server).

    decide.py    pure: may the agent stop now, and why (not); what a session is told
    hosts.py     pure: each host's hook JSON read into one call, the answer in its shape
    settings.py  pure: waypost's hooks merged into a host's settings file and taken out
    cap.py       the cap on one run's refused stops in a row
"""
