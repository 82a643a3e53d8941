"""The demo's other processes, each started as `python -m waypost.cli.demo_actors ROLE …`:

    receiver PORT_FILE DB LOG   a webhook receiver on 127.0.0.1 (a free port, written to
                                PORT_FILE) that verifies the Standard Webhooks signature with
                                `waypost.delivery.receiver`, applies each webhook-id once and logs
                                every request it got (JSON lines: headers, body, outcome)
    worker STORE RUN NOTES [DELAY]  worker-1: after DELAY seconds (default 0), claims the
                                run, drafts NOTES, records it and a test, then heartbeats
                                every half second until it is killed

The secret comes from WAYPOST_WEBHOOK_SECRET, the store from the arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MAX_BODY = 1024 * 1024
WORKER_LIFETIME = 120.0  # a worker nobody kills stops by itself


class _Receiver(ThreadingHTTPServer):
    request_queue_size = 128  # a relay's concurrent sends must not overflow the backlog


def with_options(args: list[str], *options: str) -> list[str]:
    """`args` with `options` added where the verb still reads them: before a `--`."""
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *options, *args[cut:]]


def receiver(port_file: str, db: str, log: str) -> None:
    from waypost.delivery.receiver import Receiver

    checker = Receiver(os.environ["WAYPOST_WEBHOOK_SECRET"], db)
    received = Path(db).parent

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            if not 0 <= size <= MAX_BODY:
                self._answer(413, "body too large")
                return
            body = self.rfile.read(size)

            def apply(message: object) -> None:
                webhook_id = self.headers.get("webhook-id", "")
                (received / f"{webhook_id}.json").write_bytes(body)

            status, text = checker.handle(body, dict(self.headers.items()), apply)
            with open(log, "a", encoding="utf-8") as out:
                out.write(json.dumps({"headers": {k.lower(): v for k, v in
                                                  self.headers.items()},
                                      "body": body.decode("utf-8", "replace"),
                                      "status": status, "outcome": text}) + "\n")
            self._answer(status, text)

        def _answer(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the log file says what arrived

    server = _Receiver(("127.0.0.1", 0), Hook)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


def worker(store: str, run: str, notes: str, delay: str = "0") -> None:
    from waypost.cli import main

    time.sleep(min(max(float(delay), 0.0), WORKER_LIFETIME))  # a late start, on request

    def wp(*args: str) -> None:
        if main(with_options(list(args), "--store", store, "--as", "worker-1")) != 0:
            raise SystemExit(f"worker-1: waypost {' '.join(args)} failed")

    wp("claim", run)
    wp("heartbeat", run, "--note", "collecting the merged changes", "--progress", "0.2")
    Path(notes).write_text("# Release notes\n\n- Faster start-up for the heartbeat verb.\n",
                           "utf-8")
    wp("artifact", "add", run, notes, "--role", "draft", "--name", "notes.md")
    wp("evidence", "run", run, "--kind", "test", "--", sys.executable, "-c",
       "import sys; text = open(sys.argv[1]).read(); assert text.startswith('# Release')",
       notes)
    wp("heartbeat", run, "--note", "drafted the first item; writing the rest", "--progress",
       "0.4")
    began = time.monotonic()
    while time.monotonic() - began < WORKER_LIFETIME:  # until the demo kills it
        time.sleep(0.5)
        wp("heartbeat", run)


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    actors: dict[str, Callable[..., None]] = {"receiver": receiver, "worker": worker}
    actors[role](*rest)
