"""The checkpoint packet (`waypost.packet/v1`) and every other stored shape, one name space
(`from waypost.model import Packet`).

Everything here is a frozen, keyword-only msgspec record: decoding validates types and
refuses unknown fields, naming the offending path (`$.stop_rules.max_silence`).

    base.py      `Record`, `@quick` enums, JSON in and out
    packet.py    the packet and its parts: states, blockers, artifacts, evidence, gates, …
    delivery.py  the outbox rows, their status and receipts, a relay's registration
    actors.py    a watchdog's registration, a bearer token's grant
"""

from waypost.model.actors import Grant, Role, Watcher, WatcherRole
from waypost.model.base import (
    QuickStrEnum,
    Record,
    from_json,
    json_decoder,
    quick,
    to_builtins,
    to_json,
)
from waypost.model.delivery import (
    Delivery,
    DeliveryAssurance,
    DeliveryStatus,
    OutboxItem,
    Purpose,
    Receipt,
    RelayInfo,
)
from waypost.model.packet import (
    SCHEMA,
    TERMINAL,
    Approval,
    Artifact,
    ArtifactRole,
    Assurance,
    Authority,
    Blocker,
    BlockerKind,
    ChangeRequest,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    Lease,
    Liveness,
    Nudge,
    NudgeTopic,
    Observed,
    Origin,
    Packet,
    Progress,
    Result,
    Review,
    State,
    StopRules,
    Transfer,
    Verdict,
    Waiver,
    packet_schema,
    parse_states,
)

__all__ = [
    "SCHEMA", "TERMINAL", "Approval", "Artifact", "ArtifactRole", "Assurance", "Authority",
    "Blocker", "BlockerKind", "ChangeRequest", "Delivery", "DeliveryAssurance",
    "DeliveryStatus", "Evidence", "EvidenceKind", "Gate", "Grant", "Kind", "Lease", "Liveness",
    "Nudge", "NudgeTopic", "Observed", "Origin", "OutboxItem", "Packet", "Progress", "Purpose",
    "QuickStrEnum", "Receipt", "Record", "RelayInfo", "Result", "Review", "Role", "State",
    "StopRules", "Transfer", "Verdict", "Waiver", "Watcher", "WatcherRole", "from_json",
    "json_decoder", "packet_schema", "parse_states", "quick", "to_builtins", "to_json",
]
