"""A listening TCP socket for the servers waypost runs (`waypost serve`, `waypost mcp
--http`), made so that asyncio turns Nagle's algorithm off on every connection."""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on host:port (0: any free port). Made with its protocol named
    (IPPROTO_TCP), as asyncio requires before it sets TCP_NODELAY on the connections:
    without it, a small answer written in two parts waits ~40 ms for a delayed ACK."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP,
        flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock
