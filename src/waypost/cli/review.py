"""The parent's verbs: `review` (re-run the gates here), `approve` (only on a passing review,
or with the owner's waivers), `scan` (private identifiers in files) and `inbox` (what
happened on the runs one owns)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import click

from waypost.cli.context import Ctx, echo, reviewed_option, verb
from waypost.core.gates import GateVerdict, unmet
from waypost.core.reviewed import short
from waypost.errors import RuleViolation, step
from waypost.usecases.commands import command


def _row(v: GateVerdict) -> tuple[str, str, str, str, str]:
    verdict = str(v.verdict or "not run") + (" (waived)" if v.waived else "")
    return (v.gate, "required" if v.required else "optional", verdict, v.check, v.summary)


def verdict_table(gates: Sequence[GateVerdict]) -> str:
    if not gates:
        return "  no gates declared and no stored artifacts: nothing to re-run"
    rows = [("GATE", "REQUIRED", "VERDICT", "CHECK", "SUMMARY"), *map(_row, gates)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False))
                     + "  " + r[4] for r in rows)


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True),
              help="Run the gates here [default: the current directory].")
@verb
def review(ctx: Ctx, run_id: str, cwd: str | None) -> None:
    """Owner: re-run every gate here, re-verify every artifact, record the verdicts.

    Each result is recorded as `rechecked` evidence. Exits 3 when a required gate did
    not pass (the verdicts are recorded either way).
    """
    packet, report = ctx.run(run_id).review(config=ctx.config, cwd=cwd)
    verdict = "approvable" if report.approvable else "NOT approvable: a required gate did not pass"
    bound = short(report.reviewed) if report.reviewed else None
    digest = (f"\nreviewed result: {report.reviewed} (approve with --reviewed {bound})"
              if bound else "")
    ctx.emit(report, f"{run_id} review {report.review} by {report.by}: {verdict}\n"
             + verdict_table(report.gates) + digest)
    if report.approvable and not ctx.json:  # the next command, beside the output
        named = {"reviewed": bound} if bound else {}
        echo(f"next: {command(step('approve', run_id, actor=ctx.actor, **named))}", err=True)
    if not report.approvable:
        missing = unmet(report.gates)
        failed = ", ".join(v.gate for v in missing)
        waiting = [v.gate for v in missing if v.awaits_adoption]
        adopt = (f"adopt a gate you would run, then review again: waypost gate adopt "
                 f"{run_id} {shlex.quote(waiting[0])} --as {shlex.quote(packet.owner)}; or "
                 if waiting else "")
        raise RuleViolation(
            f"review {report.review} of {run_id}: required gate(s) did not pass: {failed} "
            "(the verdicts are recorded)",
            hint=f"{adopt}send it back: waypost changes {run_id} --reason TEXT; or only the owner "
            f"{packet.owner} may waive: waypost approve {run_id} --waive GATE=REASON "
            f"{'--reviewed ' + bound + ' ' if bound else ''}"
            f"--as {shlex.quote(packet.owner)}")


@click.command()
@click.argument("run_id", metavar="RUN")
@click.option("--waive", "waives", multiple=True, metavar="GATE=REASON",
              help="Owner: accept a gate that did not pass, with the reason (shown forever).")
@reviewed_option
@click.option("--sign", is_flag=True,
              help="Co-sign the approval with your own key (waypost keys generate --holder "
                   "YOU): a signed statement of the result, its artifacts and verdicts.")
@click.option("--key-file", envvar="WAYPOST_OWNER_KEY_FILE", metavar="FILE",
              help="With --sign: your private key (an owner-only file).")
@click.option("--key-env", metavar="NAME",
              help="With --sign: the environment variable holding your private key instead.")
@verb
def approve(ctx: Ctx, run_id: str, waives: Sequence[str], reviewed: str | None, sign: bool,
            key_file: str | None, key_env: str | None) -> None:
    """Owner (or a transferee): accept the result; the final delivery is queued.

    Refused unless every required gate passed in the latest review of this result, or
    the owner waived it with a reason; and, with --reviewed, unless the result is still
    the one reviewed (it is refused, saying what changed since). With --sign the approval
    is co-signed: every final delivery carries the signed statement's digest, and a
    bundle exported later holds the statement.
    """
    from waypost.usecases.review import parse_waivers

    waivers = parse_waivers(tuple(waives))
    if sign:
        from waypost.usecases import keys
        from waypost.usecases.cosign import approve_signed

        signer = keys.load_signer(ctx.store, path=key_file, env=key_env)
        packet = approve_signed(ctx.run(run_id), signer, waivers, reviewed=reviewed)
    else:
        packet = ctx.run(run_id).approve(waivers, reviewed=reviewed)
    waived = "".join(f"\n  waived {w.gate}: {w.reason}" for w in
                     (packet.approval.waivers if packet.approval else ()))
    ctx.emit({"run": run_id, "state": packet.state, "approval": packet.approval},
             f"{run_id} {packet.state}{waived}")
    if not ctx.json:
        echo(f"next: the relay sends the result once: {command(step('deliver'))}", err=True)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--deny", "deny", multiple=True, metavar="TERM",
              help="Also flag this term (adds to [sanitize] deny in waypost.toml).")
@verb
def scan(ctx: Ctx, paths: Sequence[str], deny: Sequence[str]) -> None:
    """Find private identifiers in files: secrets, emails, private IPs, home paths and the
    deny list. Exits 3 when anything is found; values are never printed in full."""
    from waypost.usecases.scanning import scan_paths

    config = ctx.config
    findings, scanned = scan_paths(paths, deny=[*config.deny, *deny], allow=config.allow)
    files = len({f.file for f in findings})
    lines = [f"{f.file}:{f.line}:{f.column}: {f.kind} {f.preview}" for f in findings]
    lines.append(f"{len(findings)} private identifier(s) in {files} of {scanned} file(s)"
                 if findings else f"clean: nothing private in {scanned} file(s)")
    ctx.emit({"clean": not findings, "files_scanned": scanned, "findings": findings},
             "\n".join(lines))
    if findings:
        raise RuleViolation(
            f"found {len(findings)} private identifier(s) in {files} file(s)",
            hint="remove or redact them; share a run with: waypost show RUN --public")


@click.command()
@click.option("--ack", is_flag=True,
              help="Acknowledge every item listed (those that arrive meanwhile stay).")
@verb
def inbox(ctx: Ctx, ack: bool) -> None:
    """What happened on the runs you own since you last acknowledged.

    A run ready for review, blocked on you (a blocker only the owner resolves), gone silent,
    delivered (with its receipt), its delivery failed, cancelled or nudged by the watchdog:
    the runs' own events, so nothing a lost notice said is lost. A new session's start
    shows each item once ("while you were gone"); an item stays listed until --ack. The
    reader is --as (or WAYPOST_ACTOR).
    """
    from waypost.usecases import inbox as inboxes

    found = inboxes.read(ctx.store, ctx.acting() if ack else ctx.actor, ack=ack)
    ctx.emit(found, lambda: inboxes.text(found))
