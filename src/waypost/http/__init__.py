"""The HTTP API, its bearer tokens, the live web board and the host-hook endpoint (an
adapter over the use cases, like `waypost.cli`; it maps the exception root to HTTP statuses
in one place, `waypost.http.errors`). `waypost serve` starts it (`waypost.http.app`).
"""
