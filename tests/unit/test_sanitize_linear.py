"""The sanitizer's rules finish on any input, and what `redact` leaves holds nothing to find.

Time here is only a hang guard (far above the real cost, which is milliseconds): the inputs
below are the ones that made the old patterns backtrack, where 100 KB took minutes. A
running regex cannot be interrupted in-process, so the guard is a child process's timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waypost.core.sanitize import find, redact
from waypost.core.sanitize_rules import RULES, Subject, may_hit

# Each was superlinear in at least one pattern before (measured at N and 10N characters).
ADVERSARIAL = ("a_", "a.", "a-", "1.", "%", "a%", "eyJa.", "eyJ-", "sk-", "xoxb-", "10.",
               "192.168.", "ghp_", "github_pat_", "x_password", "password=\"", "password=x ",
               "=>", ":=", "a@" + "b.aws", "@a.", "C:\\Users\\", "/home/", "aws key=", "-----END ",
               "-----BEGIN ", "Bearer ", "u:p@", "://", "token: word ", ")", "=(")
SIZE = 100_000
HANG_GUARD_S = 240  # all of them together; today they take a few seconds

CHILD = """
import json, sys
from waypost.core.sanitize import find, redact
from waypost.core.sanitize_rules import RULES, Subject, may_hit
for unit in json.loads(sys.argv[1]):
    text = unit * (int(sys.argv[2]) // len(unit) + 1)
    find(text)
    redact(text)
    print(json.dumps(unit), flush=True)
"""


def test_every_rule_finishes_on_adversarial_input() -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(ADVERSARIAL), str(SIZE)],
                            stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    finished = [json.loads(line) for line in out.splitlines()]
    stuck = ADVERSARIAL[len(finished)] if len(finished) < len(ADVERSARIAL) else None
    assert stuck is None, f"{stuck!r} * {SIZE // len(stuck or 'x')} did not finish"
    assert proc.returncode == 0


PIECES = (*ADVERSARIAL, "a", "A", "1", " ", "\n", "\t", "'", '"', "=", ":", "@", ".", "/",
          "password", "PASSWORD", "db_", "token", "secret", "api_key", "AccountKey",
          "hunter2", "s3cret", "${X}", "<x>", "***", "changeme", "AKIA", "ABCDEFGHIJKLMNOP",
          "eyJhbGciOi", "hooks.slack.com/services/", "T0B1C2D3/", "SG.", "https://",
          "postgresql://", "u:", "@db", ".example.com", "10.0.0.", "7", "/Users/", "bob",
          "-----BEGIN RSA " + "PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "[REDACTED:",
          "email]", "(", ")", "{", "}", ",", ";", "&", "%(x)s")


@st.composite
def hostile_text(draw: st.DrawFn) -> str:
    """Fragments of secrets and of the old adversarial inputs, some repeated many times."""
    parts = draw(st.lists(st.tuples(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4),
                                    st.integers(1, 400)), min_size=1, max_size=6))
    return "".join("".join(unit) * times for unit, times in parts)[:20_000]


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789", min_size=2, max_size=8)


@settings(max_examples=150, deadline=timedelta(seconds=20))  # a hang guard, not a speed test
@given(text=hostile_text(), deny=st.lists(WORDS, max_size=3))
def test_redacted_text_holds_nothing_to_find(text: str, deny: list[str]) -> None:
    redacted = redact(text, deny=deny)
    assert find(redacted, deny=deny) == []
    assert redact(redacted, deny=deny) == redacted


# Values no piece above can make (`Zq`), so finding one after redaction is a leak. Built
# from pieces, so the repository holds no secret-looking text.
PLANTED = (("AKIA" + "ZQZQZQZQZQZQZQZQ", "ZQZQZQZQZQZQZQZQ"),
           ("password=" + "hunterZq7", "hunterZq7"),
           ("PASSWORD: " + "s3cretZqvalue", "s3cretZqvalue"),
           ("db_password=" + "correcthorseZqbattery", "correcthorseZqbattery"),
           ("Authorization: Bearer " + "abcZqDEF123456ghi", "abcZqDEF123456ghi"),
           ("postgresql://u:" + "secZqret" + "@db/x", "secZqret"),
           ("https://hooks.slack.com/services/" + "T00/B00/xZq123abc", "xZq123abc"),
           ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + "Zq12+/abc==;",
            "Zq12+/abc=="))


@settings(max_examples=100, deadline=timedelta(seconds=20))
@given(before=hostile_text(), after=hostile_text(), planted=st.sampled_from(PLANTED))
def test_a_planted_secret_never_survives_redaction(before: str, after: str,
                                                   planted: tuple[str, str]) -> None:
    secret, value = planted
    assert value not in redact(f"{before} {secret} {after}")


@pytest.mark.parametrize("text", ["password=> PASSWORD: " + "s3cretZqvalue a_",
                                  "password= PASSWORD: " + "s3cretZqvalue",
                                  "token=db_password= " + "s3cretZqvalue"])
def test_a_key_written_as_the_value_of_another_hides_no_secret(text: str) -> None:
    """Found by the property above: the first key's value was the second key, so the
    second's value was never read."""
    assert "s3cretZqvalue" not in redact(text)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(hostile_text(), st.text(max_size=200)))
def test_a_rule_passed_over_by_its_first_search_finds_nothing(text: str) -> None:
    """`may_hit` lets the sanitizer skip a rule's Python where the rule's first search finds
    nothing: that must never skip a rule that would have found something."""
    subject = Subject(text)
    for rule in RULES:
        if not may_hit(rule, subject):
            assert list(rule.spans(Subject(text))) == [], rule.kind
