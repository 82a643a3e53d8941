"""A GitHub webhook decided before anything acts on it: GitHub's signature (checked with
the example GitHub documents), the `/waypost` grammar (strict, bounded, one command per
comment) and the payloads of the two events read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fake_services import Hookshot
from waypost.delivery import github_commands as hub
from waypost.delivery.github_commands import Command, Heard, Ignored, Malformed, Verb, parse

# docs.github.com, "Validating webhook deliveries": the secret, the payload, the header
DOC_SECRET = "It's a Secret to Everybody"
DOC_PAYLOAD = b"Hello, World!"
DOC_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
DIGEST = "1a2b3c4d5e6f"
RUN = "wp_01JEXAMPLE0000000000000000"


def test_the_signature_is_the_one_github_documents() -> None:
    assert hub.sign(DOC_SECRET, DOC_PAYLOAD) == DOC_SIGNATURE
    assert hub.verify(DOC_SECRET, DOC_PAYLOAD, DOC_SIGNATURE)
    # the test stand-in signs as GitHub does, so the route is tested with real signatures
    assert Hookshot.signature(DOC_SECRET, DOC_PAYLOAD) == DOC_SIGNATURE


@pytest.mark.parametrize(("secret", "body", "header"), [
    (DOC_SECRET, b"Hello, World?", DOC_SIGNATURE),  # the body changed
    ("another secret", DOC_PAYLOAD, DOC_SIGNATURE),
    (DOC_SECRET, DOC_PAYLOAD, DOC_SIGNATURE.removeprefix("sha256=")),  # no prefix
    (DOC_SECRET, DOC_PAYLOAD, "sha1=" + DOC_SIGNATURE[7:]),
    (DOC_SECRET, DOC_PAYLOAD, DOC_SIGNATURE.upper()),
    (DOC_SECRET, DOC_PAYLOAD, None),
    (DOC_SECRET, DOC_PAYLOAD, ""),
    ("", DOC_PAYLOAD, hub.sign("", DOC_PAYLOAD)),  # no secret: nothing verifies
    (DOC_SECRET, DOC_PAYLOAD, DOC_SIGNATURE + "0" * 200),
])
def test_anything_but_githubs_signature_is_refused(secret: str, body: bytes,
                                                   header: str | None) -> None:
    assert not hub.verify(secret, body, header)


@pytest.mark.parametrize(("body", "command"), [
    ("/waypost review", Command(verb=Verb.REVIEW)),
    (f"/waypost review {RUN}", Command(verb=Verb.REVIEW, run=RUN)),
    (f"/waypost approve {DIGEST}", Command(verb=Verb.APPROVE, reviewed=DIGEST)),
    (f"  /waypost   approve\tsha256:{DIGEST.upper()}\r\nthanks!",
     Command(verb=Verb.APPROVE, reviewed=DIGEST.lower())),
    (f"/waypost approve {RUN} {DIGEST}", Command(verb=Verb.APPROVE, run=RUN, reviewed=DIGEST)),
    (f"/waypost changes {DIGEST} the table is wrong",
     Command(verb=Verb.CHANGES, reviewed=DIGEST, reason="the table is wrong")),
    (f"/waypost cancel {RUN} not needed", Command(verb=Verb.CANCEL, run=RUN,
                                                  reason="not needed")),
    ("/waypost cancel 1a2b3c4d5e6f is a digest, read as a reason",
     Command(verb=Verb.CANCEL, reason="1a2b3c4d5e6f is a digest, read as a reason")),
])
def test_the_grammar_reads_each_command(body: str, command: Command) -> None:
    assert parse(body) == command


@pytest.mark.parametrize("body", ["", "LGTM", "please /waypost approve 1a2b3c4d5e6f",
                                  "/waypostapprove 1a2b3c4d5e6f", "> /waypost approve x",
                                  f"thanks\n/waypost approve {DIGEST}"])
def test_a_comment_whose_first_line_is_no_command_is_none(body: str) -> None:
    assert parse(body) is None


@pytest.mark.parametrize(("body", "why"), [
    ("/waypost", "is not a command"),
    ("/waypost merge", "is not a command"),
    ("/waypost APPROVE 1a2b3c4d5e6f", "is not a command"),
    ("/waypost approve", "must name the result"),
    ("/waypost approve 1a2b3c4d5e", "must name the result"),  # eleven digits: too few
    ("/waypost approve looks-good", "must name the result"),
    (f"/waypost approve {DIGEST} looks good", "nothing after it"),
    ("/waypost changes fix it", "must name the result"),
    (f"/waypost changes {DIGEST}", "needs a reason"),
    ("/waypost cancel", "needs a reason"),
    (f"/waypost review {DIGEST}", "nothing but the run"),
    ("/waypost review wp_no/such", "is not a run id"),
    (f"/waypost approve {DIGEST}\n/waypost cancel oops", "one command per comment"),
    ("/waypost cancel " + "x" * hub.MAX_LINE, "over"),
    ("/waypost cancel why\n" + "x" * hub.MAX_BODY, "over"),
])
def test_a_command_that_does_not_read_is_refused_with_the_grammar(body: str,
                                                                 why: str) -> None:
    with pytest.raises(Malformed) as refused:
        parse(body)
    assert why in str(refused.value)
    assert hub.USAGE in str(refused.value)


runs = st.one_of(st.none(), st.from_regex(r"wp_[0-9A-Z]{26}", fullmatch=True))
digests = st.from_regex(r"[0-9a-f]{12,64}", fullmatch=True)
reasons = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs")),
                  min_size=1, max_size=40).filter(lambda t: not t.startswith("wp_"))


@given(verb=st.sampled_from(list(Verb)), run=runs, digest=digests, reason=reasons)
def test_every_command_written_by_the_grammar_reads_back(verb: Verb, run: str | None,
                                                         digest: str, reason: str) -> None:
    words = ["/waypost", str(verb), *([run] if run else [])]
    if verb in (Verb.APPROVE, Verb.CHANGES):
        words.append(digest)
    if verb in (Verb.CHANGES, Verb.CANCEL):
        words.append(reason)
    command = parse(" ".join(words) + "\n\nsome words after")
    assert command is not None
    assert (command.verb, command.run) == (verb, run)
    assert command.reviewed == (digest if verb in (Verb.APPROVE, Verb.CHANGES) else None)
    assert command.reason == (reason if verb in (Verb.CHANGES, Verb.CANCEL) else None)


@given(st.text(max_size=300))
def test_any_text_reads_as_a_command_none_or_a_refusal(body: str) -> None:
    try:
        command = parse(body)
    except Malformed:
        assert body.lstrip().startswith("/waypost")
        return
    if command is not None:
        first = body.lstrip().splitlines()[0]
        assert first.split()[0] == "/waypost"
        assert len(first) <= hub.MAX_LINE
    else:
        lines = body.lstrip().splitlines()
        assert not lines or not lines[0].split() or lines[0].split()[0] != "/waypost"


def _comment(body: str, login: str = "octocat") -> dict[str, object]:
    comment = {"id": 42, "body": body, "user": {"login": login, "type": "User"},
               "created_at": "2026-12-05T03:00:00Z"}
    return Hookshot.comment("octo/app", 7, comment)


def test_a_comment_delivery_is_heard_with_its_thread_and_author() -> None:
    heard = hub.heard("issue_comment", _comment(f"/waypost approve {DIGEST}"))
    assert isinstance(heard, Heard)
    assert (heard.kind, heard.repo, heard.number, heard.comment, heard.login) == \
        ("comment", "octo/app", 7, "42", "octocat")
    assert heard.command == Command(verb=Verb.APPROVE, reviewed=DIGEST)
    refused = hub.heard("issue_comment", _comment("/waypost approve"))
    assert isinstance(refused, Heard)
    assert refused.command is None
    assert refused.problem is not None
    assert "must name the result" in refused.problem


@pytest.mark.parametrize(("event", "payload"), [
    ("issue_comment", {**_comment(f"/waypost approve {DIGEST}"), "action": "edited"}),
    ("issue_comment", {**_comment(f"/waypost approve {DIGEST}"), "action": "deleted"}),
    ("issue_comment", _comment("LGTM")),
    ("issue_comment", {**_comment(f"/waypost approve {DIGEST}"), "repository": {}}),
    ("issue_comment", _comment(f"/waypost approve {DIGEST}", login="no such login!")),
    ("issue_comment", [1, 2]),
    ("pull_request_review", Hookshot.review("octo/app", 7, "octocat", "", state="commented")),
    ("pull_request_review", {**Hookshot.review("octo/app", 7, "octocat", ""),
                             "action": "dismissed"}),
    ("push", {"ref": "refs/heads/main"}),
])
def test_what_asks_nothing_of_waypost_is_ignored(event: str, payload: object) -> None:
    assert isinstance(hub.heard(event, payload), Ignored)


def test_an_approving_review_is_approve_of_the_digest_its_body_names() -> None:
    named = hub.heard("pull_request_review",
                      Hookshot.review("octo/app", 7, "octocat", f"/waypost approve {DIGEST}"))
    assert isinstance(named, Heard)
    assert named.kind == "review"
    assert named.command == Command(verb=Verb.APPROVE, reviewed=DIGEST)
    bare = hub.heard("pull_request_review", Hookshot.review("octo/app", 7, "octocat", "LGTM"))
    assert isinstance(bare, Heard)
    assert bare.command == Command(verb=Verb.APPROVE)  # refused after: names no result
    other = hub.heard("pull_request_review",
                      Hookshot.review("octo/app", 7, "octocat", "/waypost cancel no"))
    assert isinstance(other, Heard)
    assert other.command is None


def test_a_delivery_id_is_bounded() -> None:
    assert hub.delivery_id("72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert hub.delivery_id(None) is None
    assert hub.delivery_id("x" * 101) is None
    assert hub.delivery_id("../etc") is None
