"""`waypost migrate` and `waypost doctor` on both backends."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing, redirect_stderr, redirect_stdout
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests import pg
from tests.helpers import Cli
from waypost.cli import main
from waypost.store.postgres.setup import latest_version, migrate, parse_url, skew_diagnosis
from waypost.store.records import Status
from waypost.store.sqlite.setup import SCHEMA_VERSION


def _waypost(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _checks(out: str) -> dict[str, dict[str, Any]]:
    document = json.loads(out)
    return {c["name"]: c for c in document["checks"]}


def _schema_exists(url: str) -> bool:
    with psycopg.connect(pg.server_url()) as conn:
        row = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL",
                           (parse_url(url).schema,)).fetchone()
    return bool(row and row[0])


# --- SQLite ------------------------------------------------------------------------------


def test_doctor_passes_a_fresh_sqlite_store(cli: Cli) -> None:
    cli.ok("init")
    outcome = cli("doctor", "--json")
    assert outcome.code == 0, outcome.err
    checks = _checks(outcome.out)
    assert list(checks) == ["connect", "schema", "journal_mode", "synchronous", "integrity",
                            "disk", "runs", "history", "watchers", "credentials"]
    assert {c["status"] for c in checks.values()} == {"ok"}
    assert checks["schema"]["detail"] == f"version {SCHEMA_VERSION} (latest)"


def test_doctor_fails_a_sqlite_store_out_of_wal(cli: Cli) -> None:
    cli.ok("init")
    with closing(sqlite3.connect(cli.store)) as db:
        db.execute("PRAGMA journal_mode = DELETE")
    outcome = cli("doctor")
    assert outcome.code == 1
    assert "fail  journal_mode   delete, not wal" in outcome.out
    assert outcome.out.strip().endswith("1 check(s) failed: journal_mode")


def test_doctor_without_a_store_says_how_to_make_one(cli: Cli) -> None:
    outcome = cli("doctor", "--json")
    assert outcome.code == 1
    (check,) = json.loads(outcome.out)["checks"]
    assert check["status"] == "fail"
    assert "waypost init" in check["detail"]


def test_migrate_reports_the_sqlite_schema_version(cli: Cli) -> None:
    cli.ok("init")
    document = json.loads(cli.ok("migrate", "--json"))
    assert document["schema_version"] == document["latest"] == SCHEMA_VERSION


# --- PostgreSQL ----------------------------------------------------------------------------


def test_doctor_finds_a_missing_schema_and_does_not_create_it(pg_url: str) -> None:
    code, out, _ = _waypost("doctor", "--store", pg_url, "--json")
    assert code == 1
    checks = _checks(out)
    assert checks["connect"]["status"] == "ok"
    assert checks["schema"]["status"] == "fail"
    assert "run waypost migrate" in checks["schema"]["detail"]
    assert not _schema_exists(pg_url)


def test_migrate_then_doctor_on_postgres(pg_url: str) -> None:
    code, out, err = _waypost("migrate", "--store", pg_url, "--json")
    assert code == 0, err
    everything = list(range(1, latest_version() + 1))
    assert json.loads(out)["applied"] == everything
    code, out, _ = _waypost("migrate", "--store", pg_url)
    assert code == 0
    assert out.strip().endswith(f"version {latest_version()}, already up to date")
    code, out, err = _waypost("doctor", "--store", pg_url, "--json")
    assert code == 0, out + err
    checks = _checks(out)
    assert list(checks) == ["connect", "schema", "clock_skew", "runs", "history", "watchers",
                            "credentials"]
    assert {c["status"] for c in checks.values()} == {"ok"}
    assert "PostgreSQL" in checks["connect"]["detail"]


def test_migrate_upgrades_an_old_postgres_schema(pg_url: str) -> None:
    pg.require_postgres()
    target = parse_url(pg_url)
    with target.connect() as conn:
        assert migrate(conn, target.schema, upto=1) == [1]
    code, out, _ = _waypost("doctor", "--store", pg_url)
    assert code == 1
    assert f"version 1, but this waypost needs {latest_version()}" in out
    code, out, err = _waypost("migrate", "--store", pg_url, "--json")
    assert code == 0, err
    assert json.loads(out)["applied"] == list(range(2, latest_version() + 1))


def test_doctor_reports_an_unreachable_server() -> None:
    code, out, _ = _waypost("doctor", "--store", "postgresql://postgres@127.0.0.1:1/x")
    assert code == 1
    assert "fail  connect" in out
    assert "cannot open the PostgreSQL store" in out


@pytest.mark.parametrize(("skew", "status"), [(0.4, Status.OK), (-1.9, Status.OK),
                                              (2.5, Status.FAIL), (-30.0, Status.FAIL)])
def test_clock_skew_beyond_the_limit_fails(skew: float, status: Status) -> None:
    check = skew_diagnosis(timedelta(seconds=skew), timedelta(milliseconds=4), max_skew=2.0)
    assert check.status is status
    assert f"{skew:+.3f} s" in check.detail
    assert ("NTP" in check.detail) is (status is Status.FAIL)
