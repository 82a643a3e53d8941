"""The worker's durable outputs: `artifact add|get` and `evidence run|check|skip|add`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from waypost import model
from waypost.cli.context import Ctx, duration, epoch_option, verb


@click.group()
def artifact() -> None:
    """Record and fetch durable outputs."""


@artifact.command(name="add")
@click.argument("run_id", metavar="RUN")
@click.argument("source", metavar="PATH|URL")
@click.option("--role", default="other", show_default=True,
              type=click.Choice([r.value for r in model.ArtifactRole]))
@click.option("--name", help="Name in the packet [default: the file name].")
@epoch_option
@verb
def artifact_add(ctx: Ctx, run_id: str, source: str, role: str, name: str | None,
                 epoch: int | None) -> None:
    """Record a file (copied into the store) or a URL (a reference)."""
    packet = ctx.run(run_id, epoch).add_artifact(source, role=model.ArtifactRole(role),
                                                 name=name,
                                                 max_bytes=ctx.config.max_artifact_bytes)
    recorded = packet.artifacts[-1]
    ctx.emit({"run": run_id, "artifact": recorded},
             f"{recorded.name} {recorded.bytes or ''} {recorded.sha256 or recorded.url}")


@artifact.command(name="get")
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@click.option("-o", "--output", metavar="PATH", help="File or directory [default: ./NAME]; "
              "- for stdout.")
@click.option("--force", is_flag=True, help="Replace an existing file.")
@verb
def artifact_get(ctx: Ctx, run_id: str, name: str, output: str | None, force: bool) -> None:
    """Fetch a stored artifact's bytes (checked against its sha256).

    Writes a new regular file (atomically); an existing file only with --force, and never
    through a symbolic link, a device or a FIFO (use -o - to stream the bytes).
    """
    from waypost.usecases import artifacts

    # where it goes is decided before the bytes are read (a refusal costs no blob read)
    target = None if output == "-" else artifacts.destination(name, output, run_id=run_id,
                                                               force=force)
    recorded, data = ctx.run(run_id, writes=False).artifact(name)
    if output == "-" and ctx.json:  # one JSON document, as every verb prints: never raw bytes
        ctx.emit({"run": run_id, "artifact": recorded.name, "sha256": recorded.sha256,
                  "bytes": len(data), **_content(data)}, "")
        return
    if target is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    path = artifacts.write_out(data, target, force=force)
    ctx.emit({"run": run_id, "artifact": recorded.name, "path": str(path),
              "sha256": recorded.sha256}, str(path))


def _content(data: bytes) -> dict[str, str]:
    """The bytes in a JSON document: as text when they are UTF-8, else as base64."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"base64": base64.b64encode(data).decode("ascii")}


@click.group()
def evidence() -> None:
    """Record what was actually checked."""


@evidence.command(name="run", context_settings={"ignore_unknown_options": True})
@click.argument("run_id", metavar="RUN")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--kind", default="command", show_default=True,
              type=click.Choice([k.value for k in model.EvidenceKind if k != "skipped"]),
              help="What the command checks (a test suite, a build, a lint …).")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True),
              help="Run it in this folder [default: the current directory].")
@click.option("--timeout", metavar="DURATION", help="Kill it (and every process it started) "
              "after this [default: 1h; [limits] evidence_timeout].")
@epoch_option
@verb
def evidence_run(ctx: Ctx, run_id: str, command: Sequence[str], kind: str, cwd: str | None,
                 timeout: str | None, epoch: int | None) -> None:
    """Run `-- CMD ARGS…` and record exit code, duration, output tail and full log.

    The verb itself exits 0 once the evidence is recorded, whatever the verdict; the
    verdict is printed (and is `passed` only for exit code 0). While the command runs, the
    lease holder's heartbeat is sent for it (twice per heartbeat interval, or every 60 s),
    so a long suite does not look silent; if the lease is taken over meanwhile, the
    command still finishes and its record is refused (exit 3).
    """
    packet = ctx.run(run_id, epoch).record_command(
        command, kind=model.EvidenceKind(kind), cwd=cwd,
        timeout=duration(timeout, "--timeout", positive=True) or ctx.config.evidence_timeout,
        tail_bytes=ctx.config.output_tail_bytes, max_output=ctx.config.max_output_bytes,
        echo=None if ctx.json else _echo_err)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict}: {recorded.summary}")


def _echo_err(chunk: bytes) -> None:
    click.echo(chunk.decode("utf-8", errors="replace"), err=True, nl=False)


@evidence.command(name="check")
@click.argument("run_id", metavar="RUN")
@click.argument("check", metavar="CHECK")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True),
              help="Run it here [default: the current directory].")
@epoch_option
@verb
def evidence_check(ctx: Ctx, run_id: str, check: str, cwd: str | None,
                   epoch: int | None) -> None:
    """Run a built-in check and record the result (assurance `recorded`).

    \b
    CHECK is one of:
      artifact:NAME        stored, hash intact, unchanged on disk, substantive content
      grep:PATTERN:PATH    the regex matches a line of PATH (file, directory or artifact)
      grep!:PATTERN:PATH   the regex matches no line of PATH
      no-private[:A,B]     nothing private in the artifacts and the public summary
      http:URL [TEXT]      GET answers 2xx (and the body contains TEXT)
      command:CMD          CMD exits 0
    Exits 0 once recorded, whatever the verdict; the verdict and its reason are printed.
    """
    packet = ctx.run(run_id, epoch).check(check, config=ctx.config, cwd=cwd)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict}: {recorded.summary}")


@evidence.command(name="skip")
@click.argument("run_id", metavar="RUN")
@click.option("--kind", required=True,
              type=click.Choice([k.value for k in model.EvidenceKind]))
@click.option("--reason", required=True, help='Named, e.g. "credential X unavailable".')
@epoch_option
@verb
def evidence_skip(ctx: Ctx, run_id: str, kind: str, reason: str, epoch: int | None) -> None:
    """Record a check that could not run, and why."""
    packet = ctx.run(run_id, epoch).skip_evidence(model.EvidenceKind(kind), reason)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded}, f"{recorded.id} skipped: {reason}")


@evidence.command(name="add")
@click.argument("run_id", metavar="RUN")
@click.option("--kind", required=True,
              type=click.Choice([k.value for k in model.EvidenceKind if k != "skipped"]))
@click.option("--verdict", required=True, type=click.Choice(["passed", "failed"]))
@click.option("--summary", required=True)
@epoch_option
@verb
def evidence_add(ctx: Ctx, run_id: str, kind: str, verdict: str, summary: str,
                 epoch: int | None) -> None:
    """Record a claim typed by hand (shown as `reported`, not `recorded`)."""
    packet = ctx.run(run_id, epoch).report_evidence(model.EvidenceKind(kind),
                                                    model.Verdict(verdict), summary)
    recorded = packet.evidence[-1]
    ctx.emit({"run": run_id, "evidence": recorded},
             f"{recorded.id} {recorded.verdict} (reported): {summary}")


COMMANDS: tuple[click.Command, ...] = (artifact, evidence)
