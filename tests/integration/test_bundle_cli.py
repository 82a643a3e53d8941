"""`waypost keys`, `waypost export` and `waypost verify-bundle` at the command line: the
exit codes --help lists, the JSON report, the statement's schema; and a bundle exported
on PostgreSQL verifies as one exported on SQLite does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle_support import checked, delivered_run, members, replaced, rewrite, ring, signer
from tests.helpers import Cli, FakeClock
from waypost.core.statement import statement_schema
from waypost.model import to_json
from waypost.store import open_store
from waypost.usecases import keys
from waypost.usecases.bundles import export
from waypost.usecases.verifying import EXIT_CODES, Outcome


@pytest.fixture
def delivered(cli: Cli, tmp_path: Path) -> str:
    cli.ok("init")
    with open_store(str(cli.store)) as store:
        return delivered_run(store, FakeClock(), tmp_path)


def test_keys_are_made_listed_exported_and_retired(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    made = json.loads(cli.ok("keys", "generate", "--holder", "ci", "--out", "ci.pem",
                             "--json"))
    assert (tmp_path / "ci.pem").stat().st_mode & 0o777 == 0o600
    again = cli("keys", "generate", "--holder", "ci", "--out", "ci.pem")
    assert again.code == 5
    assert "never overwritten" in again.err
    assert made["keyid"][:16] in cli.ok("keys", "ls")
    pem = cli.ok("keys", "export", made["keyid"][:12])
    assert pem.startswith("-----BEGIN PUBLIC KEY-----")
    cli.ok("keys", "retire", made["keyid"])
    [key] = json.loads(cli.ok("keys", "export", "--keyring"))["keys"]
    assert key["retired_at"] is not None
    assert "PRIVATE" not in json.dumps(key)


def test_export_then_verify_bundle_exits_with_the_documented_codes(
        cli: Cli, delivered: str, tmp_path: Path) -> None:
    cli.ok("keys", "generate", "--holder", "store", "--out", "k.pem")
    out = cli.ok("export", delivered, "-o", "run.tar", "--key-file", "k.pem")
    assert "signed by key" in out
    (tmp_path / "ring.json").write_text(cli.ok("keys", "export", "--keyring"))
    assert cli("verify-bundle", "run.tar", "--keyring", "ring.json").code == 0
    unpinned = cli("verify-bundle", "run.tar")
    assert (unpinned.code, "intact, signer not pinned" in unpinned.out) == (10, True)
    parts = members(tmp_path / "run.tar")
    lines = dict(parts)["events.jsonl"].splitlines(keepends=True)
    del lines[1]
    rewrite(tmp_path / "bad.tar", replaced(parts, "events.jsonl", b"".join(lines)))
    broken = cli("verify-bundle", "bad.tar", "--keyring", "ring.json", "--json")
    assert broken.code == EXIT_CODES[Outcome.CHAIN] == 13
    report = json.loads(broken.out)
    assert (report["member"], report["seq"], report["ok"]) == ("events.jsonl", 2, False)
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 100)
    assert cli("verify-bundle", "junk.tar").code == 11
    helped = cli("verify-bundle", "--help").out
    for outcome, code in EXIT_CODES.items():
        assert f"{code:>4}  {outcome.value.split(':')[0]}" in helped, outcome


def test_export_refuses_a_key_file_others_may_read(cli: Cli, delivered: str,
                                                   tmp_path: Path) -> None:
    cli.ok("keys", "generate", "--holder", "store", "--out", "k.pem")
    (tmp_path / "k.pem").chmod(0o644)
    refused = cli("export", delivered, "-o", "run.tar", "--key-file", "k.pem")
    assert refused.code == 3
    assert "chmod 600" in refused.err
    assert not (tmp_path / "run.tar").exists()
    assert not (tmp_path / "run.tar.partial").exists()


def test_schema_statement_prints_the_predicate_s_schema(cli: Cli) -> None:
    assert json.loads(cli.ok("schema", "--statement")) == json.loads(
        json.dumps(statement_schema()))
    assert json.loads(cli.ok("schema"))["$id"] == "waypost.packet/v1"


def test_a_bundle_exported_on_postgresql_verifies_as_one_from_sqlite(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen = {}
    for name, url in (("pg", pg_url), ("lite", str(tmp_path / ".waypost" / "w.db"))):
        with open_store(url) as store:
            run_id = delivered_run(store, FakeClock(), tmp_path)
            path = tmp_path / f"{name}.tar"
            export(store, run_id, str(path), signer(store, tmp_path, name=f"{name}.pem"))
            report = checked(path, ring(store))
            seen[name] = (report.outcome, report.events, report.blobs,
                          [n.split("/")[0] for n, _ in members(path)])
    assert seen["pg"] == seen["lite"]
    assert seen["pg"][0] is Outcome.VERIFIED


def test_import_shows_the_run_as_imported_and_refuses_writes_to_it(
        cli: Cli, tmp_path: Path) -> None:
    home_dir = tmp_path / "home"
    with open_store(str(home_dir / ".waypost" / "w.db")) as home:
        run_id = delivered_run(home, FakeClock(), home_dir)
        out = home_dir / "run.tar"
        export(home, run_id, str(out), signer(home, home_dir, holder="team-a"))
        (tmp_path / "ring.json").write_bytes(to_json(keys.keyring(home)))
    cli.ok("init")
    said = cli.ok("import", str(out), "--keyring", "ring.json")
    assert f"imported run {run_id}" in said
    assert "from team-a" in said
    assert "read-only here" in said
    assert "nothing to import" in cli.ok("import", str(out))
    assert "imported, read-only here" in cli.ok("ls", "--all")
    assert "imported   read-only here: from team-a" in cli.ok("show", run_id)
    refused = cli("cancel", run_id, "--as", "alice", "--reason", "stop")
    assert refused.code == 3
    assert f"run {run_id} is imported from team-a" in refused.err
    broken = members(out)
    rewrite(tmp_path / "bad.tar", replaced(broken, "packet.json", b"{}"))
    bad = cli("import", "bad.tar")
    assert "is not an intact bundle" in bad.err
