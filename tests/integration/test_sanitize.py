"""The sanitizer: a planted corpus is found in every file and never shown by `show --public`.

The corpus is built at run time from pieces, so the repository holds no secret-looking text.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import Cli
from waypost.core.sanitize import FindingKind, find, public_packet, redact


def _b64(document: dict[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def corpus() -> dict[str, tuple[FindingKind, str]]:
    """Obviously fake, pattern-valid private identifiers, one per kind."""
    pem_head, pem_tail = "-----BEGIN " + "RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
    return {
        "aws": (FindingKind.AWS_KEY, "AKIA" + "FAKEFAKE" + "EXAMPLE0"),
        "github": (FindingKind.GITHUB_TOKEN, "ghp" + "_" + "Fake0Token" * 3 + "abcdef"),
        "pem": (FindingKind.PRIVATE_KEY, f"{pem_head}\nMIIFAKE{'A' * 56}\n{pem_tail}"),
        "jwt": (FindingKind.JWT, _b64({"alg": "HS256", "typ": "JWT"}) + "."
                + _b64({"sub": "fake-user"}) + "." + "fakeSignature" * 3),
        "email": (FindingKind.EMAIL, "jane.doe" + "@" + "corp-mail.test"),
        "ip": (FindingKind.PRIVATE_IP, ".".join(["10", "20", "30", "40"])),
        "home": (FindingKind.HOME_PATH, "/home/" + "user"),
    }


def test_each_kind_is_found_and_never_echoed() -> None:
    for kind, value in corpus().values():
        findings = find(f"see {value} here")
        assert [f.kind for f in findings] == [kind], value
        assert value not in findings[0].preview
        assert findings[0].line == 1
        assert findings[0].column == 5


@pytest.mark.parametrize("text", [
    "db_password: ${DB_PASSWORD}",
    "password = get_password()",
    "password = self.password",
    "the token: expired.",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "uuid 123e4567-e89b-12d3-a456-426614174000, version 10.2.3, python 3.11",
    "public resolver 8.8.8.8 and 172.32.0.1 and 192.168.1.300",
    "shared files under /Users/Shared/docs",
    "token_name = 'default'",
])
def test_ordinary_text_is_not_flagged(text: str) -> None:
    assert find(text) == []


@pytest.mark.parametrize(("text", "kind"), [
    ('DB_PASSWORD="correct horse battery"', FindingKind.PASSWORD),
    ("client_secret: Zm9vYmFy1234", FindingKind.PASSWORD),
    ('{"password": "hunter2hunter2"}', FindingKind.PASSWORD),
    ("C:\\Users\\bob\\notes.txt", FindingKind.HOME_PATH),
    ("/Users/carol/src", FindingKind.HOME_PATH),
    ("ssh 172.20.1.1 or 192.168.0.10", FindingKind.PRIVATE_IP),
])
def test_assignments_paths_and_addresses(text: str, kind: FindingKind) -> None:
    found = find(text)
    assert found
    assert {f.kind for f in found} == {kind}


def test_deny_and_allow_lists() -> None:
    text = "Project Falcon ships; ask ops" + "@" + "corp-mail.test"
    assert [f.kind for f in find(text, deny=["project falcon"])] == [
        FindingKind.DENY_LIST, FindingKind.EMAIL]
    assert find(text, allow=["ops@corp-mail.test"]) == []
    assert redact(text, deny=["Project Falcon"]).startswith("[REDACTED:deny_list] ships")


def test_redact_replaces_every_value() -> None:
    text = "\n".join(f"{name}: {value}" for name, (_, value) in corpus().items())
    redacted = redact(text)
    for _, value in corpus().values():
        assert value not in redacted
    assert redacted.count("[REDACTED:") == len(corpus())


def plant(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, (_, value) in corpus().items():
        files[name] = folder / f"{name}.txt"
        files[name].write_text(f"notes for the handoff\nvalue: {value}\nend\n")
    return files


def test_scan_finds_the_corpus_in_every_file(cli: Cli, tmp_path: Path) -> None:
    files = plant(tmp_path / "planted")
    (tmp_path / "planted" / "clean.md").write_text("# Notes\n\nNothing private here.\n")
    outcome = cli("scan", "planted", "--json")
    assert outcome.code == 3
    document = outcome.json()
    assert document["clean"] is False
    assert document["files_scanned"] == len(files) + 1
    found = {Path(f["file"]).stem: f for f in document["findings"]}
    assert set(found) == set(files)
    for name, (kind, value) in corpus().items():
        assert found[name]["kind"] == kind
        assert found[name]["line"] == 2
        assert value.splitlines()[-1] not in outcome.out
    text = cli("scan", *(str(p) for p in files.values()))
    assert text.code == 3
    assert f"{len(files)} private identifier(s) in {len(files)} of {len(files)} file(s)" in text.out


def test_scan_of_clean_files_exits_0(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("The release is ready.\n")
    assert cli.ok("scan", "a.md") == "clean: nothing private in 1 file(s)"


def test_scan_uses_the_project_deny_list(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text('[sanitize]\ndeny = ["Project Falcon"]\n')
    (tmp_path / "a.md").write_text("Status of project falcon.\n")
    outcome = cli("scan", "a.md", "--json")
    assert outcome.code == 3
    assert outcome.json()["findings"][0]["kind"] == "deny_list"


def test_scan_of_a_missing_path_is_a_usage_error(cli: Cli) -> None:
    assert cli("scan", "nope.txt").code == 2


@pytest.fixture
def leaky_run(cli: Cli, tmp_path: Path) -> str:
    """A run whose packet holds the corpus in every free-text field."""
    values = [value for _, value in corpus().values()]
    one_line = " ".join(v.replace("\n", " ") for v in values)
    cli.ok("init")
    run = cli.ok("start", f"Rotate keys for {values[4]}", "--owner", "alice")
    cli.ok("heartbeat", run, "--note", f"logged in to {values[5]} as {values[6]}")
    cli.ok("block", run, "--kind", "other", "--detail", f"key {values[0]} expired")
    cli.ok("unblock", run, "b1", "--resolution", f"new token {values[1]}")
    (tmp_path / "leak.txt").write_text("\n".join(values) + "\n")
    cli.ok("evidence", "run", run, "--", "cat", "leak.txt")
    cli.ok("artifact", "add", run, "leak.txt", "--role", "report")
    cli.ok("ready", run, "--summary", f"private: {one_line}",
           "--public-summary", f"Keys rotated; contact {values[4]} ({values[3]}).")
    return run


def test_show_public_shows_none_of_it(cli: Cli, leaky_run: str) -> None:
    private = cli.ok("show", leaky_run, "--json")
    assert corpus()["aws"][1] in private  # the owner's own view keeps everything
    for args in (["--public"], ["--public", "--json"], ["--public", "--md"]):
        shown = cli.ok("show", leaky_run, *args)
        for name, (_, value) in corpus().items():
            for piece in value.splitlines():
                assert piece not in shown, (args, name)
        assert "private:" not in shown
        assert "[REDACTED:" in shown
    document = json.loads(cli.ok("show", leaky_run, "--public", "--json"))
    assert document["result"]["summary"].startswith("[withheld")
    assert document["result"]["public_summary"].startswith("Keys rotated; contact [REDACTED:email]")


def test_public_packet_keeps_the_packet_shape(cli: Cli, leaky_run: str) -> None:
    from waypost.store import open_store

    with open_store(str(cli.store)) as store:
        packet = store.get(leaky_run)
    public = public_packet(packet, deny=["Rotate"])
    assert public.id == packet.id
    assert public.version == packet.version
    assert public.title.startswith("[REDACTED:deny_list] keys for [REDACTED:email]")


def test_a_deny_term_found_in_a_time_leaves_the_times_alone(cli: Cli, leaky_run: str) -> None:
    from waypost.store import open_store

    with open_store(str(cli.store)) as store:
        packet = store.get(leaky_run)
    year = str(packet.created_at.year)  # in every time of the packet, and in no text of it
    public = public_packet(packet, deny=[year, "Rotate"])
    assert (public.created_at, public.updated_at) == (packet.created_at, packet.updated_at)
    assert public.title.startswith("[REDACTED:deny_list] keys for")


def _modules_after(args: list[str], store: Path) -> set[str]:
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    code = ("import sys; from waypost.cli import main; main(sys.argv[1:]); "
            "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, check=True)
    return set(proc.stdout.split())


def test_show_imports_the_sanitizer_only_for_public(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "light")
    for verb in (["show", run], ["show", run, "--json"], ["heartbeat", run], ["ls"]):
        loaded = _modules_after(verb, cli.store)
        assert "waypost.core.sanitize" not in loaded, verb
        assert "waypost.usecases.checks" not in loaded, verb
        assert "urllib.request" not in loaded, verb
    assert "waypost.core.sanitize" in _modules_after(["show", run, "--public"], cli.store)


# --- secrets named by their context (issue 14, class 15) -----------------------------------

def missed() -> dict[str, tuple[str, FindingKind, str]]:
    """Each: the text as written, the kind found, and the secret part that must not show."""
    return {
        "short password": ("password=" + "hunter2", FindingKind.PASSWORD, "hunter2"),
        "upper-case key": ("PASSWORD: " + "s3cretvalue", FindingKind.PASSWORD, "s3cretvalue"),
        "prefixed key": ("db_password=" + "correcthorsebattery", FindingKind.PASSWORD,
                         "correcthorsebattery"),
        "bearer": ("Authorization: Bearer " + "abcDEF123456ghiJKL", FindingKind.TOKEN,
                   "abcDEF123456ghiJKL"),
        "sendgrid": ("SG." + "Fake0Key0Fake0Key0Fake." + "F" * 43, FindingKind.TOKEN,
                     "Fake0Key0Fake0Key0Fake"),
        "azure": ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
                  + "RmFrZUtleQ" + "==;EndpointSuffix=core.windows.net", FindingKind.PASSWORD,
                  "RmFrZUtleQ=="),
        "slack webhook": ("https://hooks.slack.com/services/" + "T0FAKE/B0FAKE/Fake0Secret1",
                          FindingKind.TOKEN, "Fake0Secret1"),
        "basic auth url": ("https://deploy:" + "Pa55word" + "@ci.example.org/api",
                           FindingKind.PASSWORD, "Pa55word"),
        "database url": ("postgresql://u:" + "secret" + "@db/x", FindingKind.PASSWORD,
                         ":secret@"),
    }


@pytest.mark.parametrize("name", list(missed()))
def test_a_secret_named_by_its_context_is_found_and_redacted(name: str) -> None:
    text, kind, secret = missed()[name]
    found = find(f"config: {text}\n")
    assert [f.kind for f in found] == [kind]
    assert secret not in found[0].preview
    assert secret not in redact(text)


@pytest.mark.parametrize("text", [
    "password: changeme",
    "password = '<your password>'",
    'password = ""',
    "password=",
    "api_key: ${API_KEY}",
    "token=$TOKEN",
    "password=%(password)s",
    "secret: ***",
    "password=xxx",
    "Set the password: see the vault.",
    "if token == expected:",
    "def login(password=password, token=None):",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    "We use Bearer authentication for the API.",
    "postgresql://app:${DB_PASSWORD}@db/app",
    "https://example.org:8443/path?q=1",
    "see https://api.slack.com/messaging/webhooks",
])
def test_documentation_of_secrets_is_not_flagged(text: str) -> None:
    assert find(text) == []


def test_a_secret_value_is_flagged_whatever_its_length() -> None:
    for value in ("a", "ab", "pin1", "hunter2", "correcthorsebatterystaple"):
        [found] = find(f"db_password={value}")
        assert found.kind is FindingKind.PASSWORD
        assert redact(f"db_password={value}") == "db_password=[REDACTED:password]"


def _secret_texts() -> list[str]:
    return [text for text, _, _ in missed().values()]


@pytest.fixture
def secret_run(cli: Cli, tmp_path: Path) -> str:
    """A run (file target, no notices) with every context-named secret in its public parts."""
    texts = _secret_texts()
    cli.ok("init")
    run = cli.ok("start", f"Rotate {texts[0]}", "--owner", "alice", "--kind", "long_running",
                 "--target", "file:result.md", "--max-silence", "1h")
    cli.ok("claim", run, actor="w1")
    cli.ok("heartbeat", run, "--note", " ".join(texts[1:4]), actor="w1")
    cli.ok("block", run, "--kind", "other", "--detail", texts[4], actor="w1")
    cli.ok("unblock", run, "b1", "--resolution", texts[5], actor="w1")
    cli.ok("evidence", "add", run, "--kind", "test", "--verdict", "passed", "--summary",
           f"tests pass against {texts[7]}", actor="w1")
    cli.ok("ready", run, "--summary", "private", "--public-summary",
           f"Done; hooks at {texts[6]} and the store at {texts[8]}.", actor="w1")
    return run


def test_show_public_and_the_delivered_document_show_no_context_named_secret(
        cli: Cli, secret_run: str, tmp_path: Path) -> None:
    secrets = [secret for _, _, secret in missed().values()]
    assert secrets[0] in cli.ok("show", secret_run, "--json")  # the owner's own view
    for args in (["--public"], ["--public", "--json"], ["--public", "--md"]):
        shown = cli.ok("show", secret_run, *args)
        leaked = [secret for secret in secrets if secret in shown]
        assert leaked == [], args
    cli.ok("review", secret_run)
    cli.ok("approve", secret_run)
    cli.ok("deliver", "--once")
    delivered = (tmp_path / "result.md").read_text()
    assert "Done; hooks at" in delivered
    assert [secret for secret in secrets if secret in delivered] == []


def test_a_slack_notify_url_is_not_shown_in_full(cli: Cli) -> None:
    hook = "https://hooks.slack.com/services/" + "T0FAKE/B0FAKE/Fake0Secret1"
    cli.ok("init")
    run = cli.ok("start", "Notify me", "--owner", "alice", "--notify", hook)
    for args in (["--public"], ["--public", "--json"], ["--public", "--md"]):
        assert "Fake0Secret1" not in cli.ok("show", run, *args)


# --- hostile text does not stall a reader (issue 14, class 2) ------------------------------

HANG_GUARD_S = 120  # today: well under a second; before: past 300 s


def _waypost(args: list[str], store: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WAYPOST_URL": str(store), "WAYPOST_ACTOR": "alice"}
    code = "import sys; from waypost.cli import main; raise SystemExit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=HANG_GUARD_S, check=False)


def test_show_public_of_an_adversarial_note_finishes(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    run = cli.ok("start", "Hostile note", "--owner", "alice")
    cli.ok("limits", "--set", "note=120000")  # the store lets notes this long in
    cli.ok("heartbeat", run, "--note", "a_" * 60000)
    shown = _waypost(["show", run, "--public", "--json"], cli.store, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == run


def test_scan_of_adversarial_text_finishes(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "hostile.txt").write_text("a." * 50000 + "\n" + "1." * 50000 + "\n")
    scanned = _waypost(["scan", "hostile.txt", "--json"], cli.store, tmp_path)
    assert scanned.returncode == 0, scanned.stderr
    assert json.loads(scanned.stdout)["clean"] is True
