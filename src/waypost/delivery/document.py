"""What a delivery says: the final result document, or a notice, built from the packet.

Both are JSON documents in the Standard Webhooks payload shape (`type`, `timestamp`,
`data`); `type` is `final` or `notice`, so one can never be taken for the other. Only public
parts go out: everything passes through `publishable` first, which withholds the private
summary (`result.summary` is the owner's alone) and runs every string through the sanitizer.
The same document is rendered as the webhook body, the `exec:` command's stdin, and the
`file:` target (Markdown, or JSON for a `.json` path). It depends only on the packet and the
delivery, never on the time of sending, so a retried file write finds identical content.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from waypost.core.reviewed import result_digest
from waypost.display import md_block, md_inline
from waypost.events import Event
from waypost.model import Artifact, Delivery, Evidence, Packet, Purpose, to_builtins, to_json

Document = dict[str, Any]
NO_PUBLIC_SUMMARY = "(no public summary was given)"


def publishable(packet: Packet, *, deny: Sequence[str] = (),
                allow: Sequence[str] = ()) -> Packet:
    """The one place where a packet is made safe to send: private summary withheld, every
    string redacted by `waypost.core.sanitize` (with the project's deny/allow terms)."""
    from waypost.core.sanitize import public_packet

    return public_packet(packet, deny=deny, allow=allow)


def build(packet: Packet, delivery: Delivery, *, event: Event | None = None,
          deny: Sequence[str] = (), allow: Sequence[str] = ()) -> Document:
    """The document `delivery` sends; `event` is the one that queued a notice. Both carry
    the run's reviewed-result digest (`data.reviewed`, `core.reviewed`), computed from the
    packet before it is made public, so a message can say which result an answer binds."""
    reviewed = result_digest(packet)
    public = publishable(packet, deny=deny, allow=allow)
    if delivery.purpose is Purpose.FINAL:
        signed = packet.approval.statement if packet.approval else None
        return final_document(public, delivery, reviewed=reviewed,
                              statement=f"sha256:{signed}" if signed else None)
    return notice_document(public, delivery, event, reviewed=reviewed)


def final_document(public: Packet, delivery: Delivery, *, reviewed: str | None = None,
                   statement: str | None = None) -> Document:
    """The final result; `statement`: the digest of the owner's signed approval statement
    (`approve --sign`), carried as `approval_statement` only when the approval was signed."""
    approval = public.approval
    approved = to_builtins(approval) if approval else None
    if approved is not None:
        approved.pop("statement", None)  # as `approval_statement`, taken before redaction
    data = {
        "run": public.id,
        "reviewed": reviewed,
        "title": public.title,
        "state": public.state,
        "owner": public.owner,
        "public_summary": public.result.public_summary if public.result else None,
        "artifacts": [_artifact(public, a) for a in public.artifacts],
        "evidence": [_evidence(e) for e in public.evidence],
        "approval": approved,
        "fetch": f"waypost show {public.id} --public",
        **({"approval_statement": statement} if statement else {}),
    }
    when = approval.at if approval else delivery.created_at
    return _envelope("final", delivery, when, data)


def notice_document(public: Packet, delivery: Delivery, event: Event | None, *,
                    reviewed: str | None = None) -> Document:
    data: dict[str, Any] = {"run": public.id, "title": public.title, "state": public.state,
                            "owner": public.owner, "reviewed": reviewed}
    blocker_id = getattr(event.data, "blocker_id", None) if event else None
    blocker = next((b for b in public.blockers if b.id == blocker_id), None)
    if blocker is not None:
        data["blocker"] = {"id": blocker.id, "kind": blocker.kind, "detail": blocker.detail}
        data["message"] = f"run {public.id} is blocked: {blocker.kind}: {blocker.detail}"
        data["next"] = (f"waypost unblock {public.id} {blocker.id} --resolution TEXT "
                        f"--as {shlex.quote(public.owner)}")
    elif delivery.topic == "ready_for_review":
        data["public_summary"] = public.result.public_summary if public.result else None
        data["message"] = f"run {public.id} is ready for review"
        data["next"] = f"waypost review {public.id} --as {shlex.quote(public.owner)}"
    else:
        data["message"] = f"run {public.id}: {delivery.topic}"
        data["next"] = f"waypost show {public.id}"
    return _envelope("notice", delivery, event.at if event else delivery.created_at, data)


def _envelope(kind: str, delivery: Delivery, when: datetime, data: Document) -> Document:
    document: Document = to_builtins({"type": kind, "id": delivery.key,
                                      "topic": delivery.topic, "timestamp": when,
                                      "data": data})
    return document


def _artifact(public: Packet, artifact: Artifact) -> Document:
    fetch = artifact.url or (f"waypost artifact get {public.id} {shlex.quote(artifact.name)}"
                             if artifact.stored else None)
    return {"name": artifact.name, "role": artifact.role, "sha256": artifact.sha256,
            "bytes": artifact.bytes, "media_type": artifact.media_type, "url": artifact.url,
            "fetch": fetch}


def _evidence(evidence: Evidence) -> Document:
    return {"id": evidence.id, "kind": evidence.kind, "verdict": evidence.verdict,
            "assurance": evidence.assurance, "summary": evidence.summary,
            "reason": evidence.reason, "command": evidence.command,
            "exit_code": evidence.exit_code, "gate": evidence.gate}


# --- renderings ---------------------------------------------------------------------------


def body(document: Document) -> bytes:
    """Compact JSON: the webhook body and the exec command's stdin (signed exactly as sent)."""
    return to_json(document)


def json_file(document: Document) -> bytes:
    import json

    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def markdown(document: Document) -> str:
    """The final result as Markdown (a notice is one line of JSON, never Markdown). Every
    string in it came from someone, so each is escaped (`waypost.display`): a title can
    never open a section of its own, nor a summary a fence, a link or an HTML tag."""
    data = document["data"]
    approval = data.get("approval") or {}
    out = [f"# {md_inline(data['title'])}", "",
           f"Final result of run `{data['run']}` ({data['state']}); approved by "
           f"{md_inline(str(approval.get('by', '?')))} at {approval.get('at', '?')}"
           f"{_reviewed(approval.get('reviewed'))}.", "",
           *_cosigned(data.get("approval_statement")),
           "## Summary", "", md_block(data.get("public_summary") or NO_PUBLIC_SUMMARY)]
    if data["artifacts"]:
        out += ["", "## Artifacts", "", "| name | role | bytes | sha256 | fetch |",
                "|---|---|---|---|---|"]
        out += [f"| {md_inline(a['name'])} | {a['role']} | "
                f"{a['bytes'] if a['bytes'] is not None else ''} | {_digest(a['sha256'])} | "
                f"{md_inline(a['fetch'] or '')} |" for a in data["artifacts"]]
    out += ["", "## Evidence", "", "| id | verdict | assurance | kind | summary |",
            "|---|---|---|---|---|"]
    out += [f"| {e['id']} | {e['verdict']} | {e['assurance']} | {e['kind']} | "
            f"{md_inline(_with_reason(e['summary'], e['reason']))} |"
            for e in data["evidence"]]
    if approval.get("waivers"):
        out += ["", "## Waivers", ""]
        out += [f"- {md_inline(w['gate'])}: {md_inline(w['reason'])} ({md_inline(w['by'])})"
                for w in approval["waivers"]]
    out += ["", f"<!-- waypost delivery {document['id']} -->"]
    return "\n".join(out) + "\n"


def _cosigned(digest: str | None) -> list[str]:
    """The line naming the owner's signed approval statement, when the approval was signed."""
    hexes = (digest or "").removeprefix("sha256:")
    if len(hexes) != 64 or any(c not in "0123456789abcdef" for c in hexes):
        return []
    return [f"Approval co-signed by the approver: signed statement `sha256:{hexes}`.", ""]


def _reviewed(digest: str | None) -> str:
    """The reviewed-result digest the approval bound, as code (`core.reviewed`)."""
    hexes = (digest or "").removeprefix("sha256:")
    if not hexes or any(c not in "0123456789abcdef" for c in hexes):
        return ""
    return f", reviewed result `sha256:{hexes}`"


def _digest(sha256: str | None) -> str:
    """A sha256 as code; anything else it might hold is escaped text."""
    if sha256 and all(c in "0123456789abcdef" for c in sha256):
        return f"`{sha256}`"
    return md_inline(sha256 or "")


def _with_reason(summary: str, reason: str | None) -> str:
    return f"{summary} — {reason}" if reason and reason not in summary else summary
