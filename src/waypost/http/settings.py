"""What `waypost serve` was told: where the store is, where to listen, and what a remote
caller may make the server do (run commands, reach hosts, read the board unauthenticated)."""

from __future__ import annotations

import msgspec

from waypost.config import Config
from waypost.core.exposure import Exposure, facing_network

DEFAULT_PORT = 8470
MAX_JSON_BODY = 1024 * 1024  # a command's JSON body; artifacts stream under their own limit
THREADS = 16


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    store_url: str  # the store every request uses, opened once when the server starts
    host: str = "127.0.0.1"  # loopback unless told otherwise; TLS belongs to a reverse proxy
    port: int = DEFAULT_PORT
    # Run commands, http: checks and path-reading checks for remote callers (evidence run,
    # command:/http: gates at review). Off: the caller is told to run them where they may.
    allow_exec: bool = False
    # The board without a token; honoured on a loopback host only.
    open_board: bool = False
    # Hosts that webhook targets and http: checks registered over the API may reach
    # (loopback and private ranges too, but only when listed).
    outbound: tuple[str, ...] = ()
    max_json_body: int = MAX_JSON_BODY
    # Threads running the requests' store calls at once. Writes that wait while a group is
    # being made durable commit together in the next one, so this bounds a group's size:
    # with asyncio's default (CPUs + 4) groups held 1.5 writes on average under 50 clients,
    # with 16 threads 3.7-3.9; 64 threads grouped a little more but cost more CPU per
    # request (threads contending for the GIL) than they saved in fsyncs.
    threads: int = THREADS
    project: Config = msgspec.field(default_factory=Config)  # waypost.toml, read at start
    # the key that signs a run's bundle or public statement (GET /api/runs/{id}/bundle): an
    # owner-only file, or the name of an environment variable holding it; read when used
    signing_key_file: str | None = None
    signing_key_env: str | None = None

    @property
    def exposure(self) -> Exposure:
        """What its remote callers may make it run, read or reach (one policy, which MCP
        over HTTP asks too)."""
        return facing_network(allow_exec=self.allow_exec, outbound=self.outbound)
