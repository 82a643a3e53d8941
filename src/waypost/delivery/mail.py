"""`mailto:ADDRESS` over SMTP (`smtplib`): the server from `WAYPOST_SMTP_URL`
(`smtp://user:pass@host:587?starttls=1`, or `smtps://…` for TLS from the start) and the
sender from `WAYPOST_SMTP_FROM` (or `[delivery] smtp_url` / `smtp_from`).

The message has a stable `Message-ID: <delivery-key@sender's domain>`, the same on every
retry, and the result document as its body. A ready-for-review notice also says where to
review: with a board URL and `WAYPOST_LINK_SECRET`, a link that signs the owner in to the
run once (`core.links`: the same delivery makes the same link); with a board URL alone,
the run's page; else the command. SMTP cannot be asked whether a message arrived,
so a retry after a lost answer may deliver a second copy (with the same Message-ID, which
mail clients may fold together): the receipt says `at_least_once`. The whole send, from
connecting to QUIT, ends by one deadline: the socket is shut when it passes.
"""

from __future__ import annotations

import contextlib
import smtplib
import socket
import ssl
import threading
import urllib.parse
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

import msgspec

from waypost.core import links
from waypost.delivery import document
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.policy import Attempt, for_smtp, give_up, missing_credential, retry, sent
from waypost.errors import InvalidInput
from waypost.model import DeliveryAssurance

NO_SERVER = "WAYPOST_SMTP_URL is not set (nor [delivery] smtp_url)"
NO_SENDER = "WAYPOST_SMTP_FROM is not set (nor [delivery] smtp_from)"
READY = "ready_for_review"


class SmtpServer(msgspec.Struct, frozen=True, kw_only=True):
    host: str
    port: int
    tls: bool = False  # TLS from the start (smtps://)
    starttls: bool = False
    user: str | None = None
    password: str | None = None


def smtp_server(url: str) -> SmtpServer:
    """The server a `WAYPOST_SMTP_URL` names (InvalidInput naming what is wrong, never the
    password)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise InvalidInput("WAYPOST_SMTP_URL is not smtp://[USER:PASS@]HOST[:PORT][?starttls=1]"
                           " or smtps://…")
    try:
        port = parts.port
    except ValueError:
        raise InvalidInput("WAYPOST_SMTP_URL names a port that is not a port") from None
    query = urllib.parse.parse_qs(parts.query)
    starttls = query.get("starttls", ["0"])[-1].lower() in ("1", "true", "yes")
    tls = parts.scheme == "smtps"
    return SmtpServer(host=parts.hostname, port=port or (465 if tls else 587 if starttls else 25),
                      tls=tls, starttls=starttls,
                      user=urllib.parse.unquote(parts.username) if parts.username else None,
                      password=urllib.parse.unquote(parts.password) if parts.password else None)


class Board(msgspec.Struct, frozen=True, kw_only=True):
    """Where a ready-for-review mail sends its reader: the board, and the link secret."""

    url: str | None = None
    link_secret: str | None = None
    link_ttl: float = 7 * 86400.0


class MailTarget(Target):
    def __init__(self, uri: str, *, smtp_url: str | None, sender: str | None,
                 timeout: float, board: Board | None = None) -> None:
        self.address = uri.removeprefix("mailto:")
        self.smtp_url = smtp_url
        self.sender = sender
        self.timeout = timeout
        self.board = board or Board()

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        if not self.smtp_url:
            return missing_credential(NO_SERVER)
        if not self.sender:
            return missing_credential(NO_SENDER)
        try:
            server = smtp_server(self.smtp_url)
        except InvalidInput as exc:
            return give_up(exc.message)
        message = email_message(outgoing, sender=self.sender, to=self.address, at=at,
                                board=self.board)
        return Session(server, self.timeout).deliver(message, self.address)


def email_message(outgoing: Outgoing, *, sender: str, to: str, at: datetime,
                  board: Board | None = None) -> EmailMessage:
    doc, delivery = outgoing.document, outgoing.delivery
    data = doc["data"]
    domain = sender.rpartition("@")[2] or "waypost"
    what = data["state"] if doc["type"] == "final" else delivery.topic
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = " ".join(f"[waypost] {data['title']}: {what}".split())[:200]
    message["Message-ID"] = f"<{delivery.key}@{domain}>"
    message["Date"] = format_datetime(at)
    message.set_content(document.markdown(doc) if doc["type"] == "final"
                        else _notice(outgoing, board or Board()))
    return message


def _notice(outgoing: Outgoing, board: Board) -> str:
    doc = outgoing.document
    data = doc["data"]
    where = _where_to_review(outgoing, board) if outgoing.delivery.topic == READY else ""
    return f"{data.get('message', '')}\n\n{where}next: {data['next']}\n\n" + \
        document.json_file(doc).decode()


def _where_to_review(outgoing: Outgoing, board: Board) -> str:
    """The paragraph a ready-for-review mail leads with: the owner's sign-in link, else the
    run's page, else the command (which `next:` names)."""
    delivery = outgoing.delivery
    if not board.url:
        return ("Review it where waypost runs, with the command below (no board URL is "
                "configured).\n\n")
    base = board.url.rstrip("/")
    if not board.link_secret or not outgoing.owner:
        return f"Review it on the board: {base}/runs/{delivery.run_id}\n\n"
    expires = delivery.created_at + timedelta(seconds=board.link_ttl)
    link = links.link_for(run=delivery.run_id, owner=outgoing.owner,
                          delivery_key=delivery.key, expires_at=expires)
    return (f"Review it on the board, signed in as {outgoing.owner} for this run alone:\n"
            f"{base}/link/{links.make(link, board.link_secret)}\n"
            f"The link works once, until {link.expires_at:%Y-%m-%d %H:%M}Z; it opens a page "
            "with one button that signs you in. Do not forward this mail.\n\n")


class Session:
    """One SMTP conversation under one deadline; what it came to, classified."""

    def __init__(self, server: SmtpServer, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self.phase = "connect"  # connect, send (DATA may be accepted), done

    def deliver(self, message: EmailMessage, address: str) -> Attempt:
        server = self.server
        smtp = smtplib.SMTP_SSL(timeout=self.timeout, context=ssl.create_default_context()) \
            if server.tls else smtplib.SMTP(timeout=self.timeout)
        deadline = threading.Timer(self.timeout, _shut, (smtp,))
        deadline.start()
        try:
            return self._talk(smtp, message, address)
        finally:
            deadline.cancel()
            smtp.close()

    def _talk(self, smtp: smtplib.SMTP, message: EmailMessage, address: str) -> Attempt:
        server, where = self.server, f"the SMTP server {self.server.host}:{self.server.port}"
        try:
            smtp.connect(server.host, server.port)
            if server.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if server.user:
                smtp.login(server.user, server.password or "")
            self.phase = "send"
            smtp.send_message(message)
            self.phase = "done"
            with contextlib.suppress(smtplib.SMTPException, OSError):
                smtp.quit()  # accepted before QUIT: it is sent, whatever QUIT says
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = next(iter(exc.recipients.values()), (550, b"refused"))
            return for_smtp(code, reply.decode(errors="replace"), f"the address {address}")
        except smtplib.SMTPNotSupportedError as exc:
            return give_up(f"{where}: {exc} (check ?starttls= and the login in "
                           "WAYPOST_SMTP_URL)")
        except smtplib.SMTPResponseException as exc:
            error: bytes | str = exc.smtp_error
            text = error.decode(errors="replace") if isinstance(error, bytes) else error
            return for_smtp(exc.smtp_code, text, where)
        except (smtplib.SMTPException, OSError) as exc:
            unknown = self.phase == "send"  # the message may have been accepted
            maybe = "; it may have been accepted: outcome unknown" if unknown else ""
            return retry(f"{where}: {type(exc).__name__}: {exc or 'no answer'}{maybe}",
                         outcome_unknown=unknown)
        return sent(f"SMTP: accepted for {address} by {server.host} "
                    f"(Message-ID {message['Message-ID']})", DeliveryAssurance.AT_LEAST_ONCE,
                    {"message_id": str(message["Message-ID"])})


def _shut(smtp: smtplib.SMTP) -> None:
    """The deadline passed: end the conversation wherever it is (its read fails)."""
    sock = getattr(smtp, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
