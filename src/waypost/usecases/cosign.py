"""`approve --sign`: the owner co-signs the approval with a key of their own.

Decided first, before anything is signed or stored: the key is the approver's (its holder
is the acting owner, and the store records it as valid now), the run may be written (not
imported), and the approval itself would be accepted now (`Run.precheck`: who, which
state, every gate passed or waived, the digest given still the result's). Then the
approval statement (`core.cosigned`) is signed, its envelope stored as a blob, and the
approval recorded bound to exactly the digest signed, naming the envelope's sha256; a
result reviewed again in between refuses the approval (ResultChanged), and the blob it
left names nothing (`prune` removes it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from waypost.core import signing
from waypost.core.cosigned import approval_statement
from waypost.core.reviewed import result_digest
from waypost.errors import NotAuthorized
from waypost.model import Packet, Waiver, to_json
from waypost.usecases import approval
from waypost.usecases.keys import Signer
from waypost.usecases.review import writable
from waypost.usecases.runs import Run


def approve_signed(run: Run, signer: Signer, waivers: Mapping[str, str] | None = None, *,
                   reviewed: str | None = None) -> Packet:
    """Approve as `run.actor`, co-signed by `signer` (the actor's own key)."""
    record = signer.record
    if record.holder != run.actor:
        raise NotAuthorized(
            f"key {record.keyid[:16]} is {record.holder}'s, not {run.actor}'s: an approval is "
            "co-signed with the approver's own key",
            hint=f"make one with: waypost keys generate --holder {run.actor} --out FILE")
    digest = approval.given(reviewed)
    writable(run.store, run.id)  # an imported run is refused first
    at = run.clock()
    given = tuple(Waiver(gate=g, reason=r, by=run.actor, at=at)
                  for g, r in (waivers or {}).items())
    packet = run.precheck(lambda p: approval.approved(run, p, given, digest))
    current = result_digest(packet)
    assert current is not None  # the precheck refuses an approval of no result
    said = approval_statement(packet, current, given, by=run.actor, at=at)
    envelope = signing.envelope_json(signing.sign(to_json(said), signer.key))
    sha = run.store.put_blob(envelope)
    assert sha == hashlib.sha256(envelope).hexdigest()
    return run.approve(waivers, reviewed=current, statement=sha)
