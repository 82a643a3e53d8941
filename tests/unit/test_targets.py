"""The target and notify URI rules (`core.targets`) and the delivery-error classifier
(`delivery.policy`): pure, no files or network."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waypost.core.targets import FORMS, MAX_URI, Places, check_uri, file_destination, inside
from waypost.delivery.policy import Outcome, for_exit, for_os_error
from waypost.errors import InvalidInput

PLACES = Places(root="/srv/project", allow=("/var/reports",))


@pytest.mark.parametrize("uri", [
    "file:result.md", "file:out/result.json", "file:./out/r.md", "file:///srv/project/r.md",
    "file:/srv/project/deep/r.md", "file:/var/reports/r.md", "file:///var/reports/a/b.md",
    "http://127.0.0.1:8080/hook", "https://hooks.example/x?run=1", "http://[::1]:9/h",
    "https://hooks.example", "http://a:1", "https://my_host.internal-1/x#frag",
    "exec:notify-send done", "exec:'/opt/my tools/send' --all",
    "slack:C0123ABCD", "slack:G01ABCDEF23", "slack-webhook:https://hooks.slack.com/services/x",
    "github:octo-org/hello.world#12", "github-status:o/r@" + "0a" * 20,
    "github-status:o/r@" + "f" * 64, "mailto:alice@example.com", "mailto:a.b+c@mail.x.org",
    "none:",
])
def test_accepted_forms(uri: str) -> None:
    check_uri(uri, PLACES)


@pytest.mark.parametrize(("uri", "why"), [
    ("file:", "names no file"),
    ("file:   ", "names no file"),
    ("file://", "names no file"),
    ("file://host/x.md", "names no host"),
    ("file:../x.md", ".. may lead out"),
    ("file:../../x", ".. may lead out"),
    ("file:out/../../x", ".. may lead out"),
    ("file:~/x", "~ is the home"),
    ("file:~root/x", "~ is the home"),
    ("file:/etc/cron.d/x", "outside the delivery root /srv/project"),
    ("file:///tmp/x.md", "outside the delivery root"),
    ("file:/srv/projectile/x", "outside the delivery root"),
    ("file:/var/reports", "outside the delivery root"),
    ("file:out/", "names a folder"),
    ("file:.", "names a folder"),
    ("file:.waypost/waypost.db", ".waypost/ is the store's own folder"),
    ("file:./.waypost/x", ".waypost/ is the store's own folder"),
    ("file:a\nb.md", "control character"),
    ("https://", "names no host"),
    ("http://", "names no host"),
    ("http://127.0.0.1:abc/", "names no host, or a bad one"),
    ("http://127.0.0.1:/", "names no host, or a bad one"),
    ("http://:80/", "names no host, or a bad one"),
    ("http://./", "names no host, or a bad one"),
    ("https://-x-/", "names no host, or a bad one"),
    ("http://h\u00e9:80/", "names no host, or a bad one"),
    ("http://127.0.0.1:0/", "port 0 is not a port"),
    ("http://127.0.0.1:99999/", "port 99999 is not a port"),
    ("https://@hooks.example/x", "credentials do not belong"),
    ("https://user:pw@hooks.example/x", "credentials do not belong"),
    ("https://hooks.example/a b", "no spaces"),
    ("HTTPS://hooks.example/x", "not a target waypost can deliver to"),
    ("javascript:alert(1)", "not a target waypost can deliver to"),
    ("ftp://files.example/x", "not a target waypost can deliver to"),
    ("result.md", "not a target waypost can deliver to"),
    ("", "not a target waypost can deliver to"),
    ("none:nobody", "not a target waypost can deliver to"),
    ("exec:", "names no command"),
    ("exec:   ", "names no command"),
    ("exec:''", "names no command"),
    ("exec:echo 'unbalanced", "cannot be split into words"),
    ("slack:#general", "write the channel's ID"),
    ("slack:", "write the channel's ID"),
    ("slack-webhook:hooks.slack.com/x", "write slack-webhook:https://"),
    ("slack-webhook:https://u:p@hooks.slack.com/x", "credentials do not belong"),
    ("github:owner/repo", "write github:OWNER/REPO#NUMBER"),
    ("github:owner/..#1", "write github:OWNER/REPO#NUMBER"),
    ("github:owner/repo#0", "write github:OWNER/REPO#NUMBER"),
    ("github-status:owner/repo@abc", "the full commit SHA"),
    ("github-status:owner/repo@main", "the full commit SHA"),
    ("mailto:alice", "one address"),
    ("mailto:alice@example.com?subject=hi", "one address"),
    ("mailto:a@example.com,b@example.com", "one address"),
    ("https://hooks.example/" + "a" * MAX_URI, f"longer than {MAX_URI} characters"),
])
def test_refused_forms_say_why_and_list_the_accepted_ones(uri: str, why: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_uri(uri, PLACES, field="notify")
    assert why in refused.value.message
    assert refused.value.message.startswith("notify ")
    assert FORMS in refused.value.hint


def test_relative_paths_start_at_the_root() -> None:
    assert file_destination("file:out/r.md", PLACES) == "/srv/project/out/r.md"
    assert file_destination("file:./r.md", PLACES) == "/srv/project/r.md"
    assert file_destination("file:///var/reports/r.md", PLACES) == "/var/reports/r.md"


def test_inside_is_strict_and_by_whole_names() -> None:
    assert inside("/a/b/c", "/a/b")
    assert not inside("/a/b", "/a/b")
    assert not inside("/a/bc", "/a/b")
    assert inside("/x", "/")


@given(st.text(max_size=300))
def test_any_text_is_accepted_or_refused_never_an_accident(text: str) -> None:
    for uri in (text, "file:" + text, "http://" + text, "exec:" + text):
        try:
            check_uri(uri, PLACES)
        except InvalidInput:
            continue


@given(st.lists(st.sampled_from(["a", "b", ".", "..", "", "~", ".waypost"]), max_size=8))
def test_an_accepted_file_path_never_leaves_its_places(parts: list[str]) -> None:
    uri = "file:" + "/".join(parts)
    try:
        path = file_destination(uri, PLACES)
    except InvalidInput:
        return
    assert PLACES.holds(path)
    assert not inside(path, "/srv/project/.waypost")
    assert ".." not in parts


@pytest.mark.parametrize(("code", "outcome"), [
    (errno.EACCES, Outcome.GIVE_UP), (errno.EPERM, Outcome.GIVE_UP),
    (errno.EROFS, Outcome.GIVE_UP), (errno.ENOTDIR, Outcome.GIVE_UP),
    (errno.EISDIR, Outcome.GIVE_UP), (errno.ELOOP, Outcome.GIVE_UP),
    (errno.ENOSPC, Outcome.RETRY), (errno.EDQUOT, Outcome.RETRY), (errno.EIO, Outcome.RETRY),
    (errno.EAGAIN, Outcome.RETRY), (errno.ENOENT, Outcome.RETRY),
])
def test_os_errors_are_permanent_only_when_a_retry_meets_them_again(
        code: int, outcome: Outcome) -> None:
    attempt = for_os_error(OSError(code, "said"), "cannot write /srv/project/r.md")
    assert attempt.outcome is outcome
    assert attempt.detail == "cannot write /srv/project/r.md: said"


@pytest.mark.parametrize(("code", "outcome", "detail"), [
    (0, Outcome.SENT, "exec: exit 0"),
    (127, Outcome.GIVE_UP, "exec: exit 127 (command not found)"),
    (126, Outcome.GIVE_UP, "exec: exit 126 (not executable)"),
    (64, Outcome.GIVE_UP, "exec: exit 64 (usage error)"),
    (78, Outcome.GIVE_UP, "exec: exit 78 (configuration error)"),
    (1, Outcome.RETRY, "exec: exit 1"),
    (75, Outcome.RETRY, "exec: exit 75"),
    (-9, Outcome.RETRY, "exec: killed by signal 9"),
])
def test_exit_statuses(code: int, outcome: Outcome, detail: str) -> None:
    attempt = for_exit(code, "")
    assert (attempt.outcome, attempt.detail) == (outcome, detail)
