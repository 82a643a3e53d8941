"""The server's side of the answers from Slack and GitHub (`usecases.answers`): the thread
that carries accepted answers out while the server runs, and the one call a service's door
makes once it has decided a request (`hand_over`: stored, and the thread woken)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from litestar.datastructures import State

from waypost.delivery.settings import DeliverySettings, load_settings
from waypost.http.settings import ServerConfig
from waypost.http.slack_replies import slack_reply
from waypost.store import Store
from waypost.usecases import github_answers
from waypost.usecases.answers import Answer, Answerer, Outcome, Reply, accept

STOP_WAIT = 5.0  # seconds the server waits for an answer being carried out when it stops


def replies(config: ServerConfig, store: Store) -> dict[str, Reply]:
    """How each service is shown the outcome of an answer that came from it."""
    found: dict[str, Reply] = {}
    for source, make in REPLIES.items():
        found[source] = make(config, store)
    return found


def delivery_settings(config: ServerConfig) -> DeliverySettings:
    """The relay's settings as the server finds them (tokens and API bases by name from the
    environment, `[delivery]` beside the project's waypost.toml): a reply uses the same."""
    return load_settings(os.path.dirname(config.project.path) if config.project.path
                         else None)


def _github(config: ServerConfig, store: Store) -> Reply:
    return github_answers.reply(store, delivery_settings(config))


def _slack(config: ServerConfig, store: Store) -> Reply:
    return slack_reply(lambda: delivery_settings(config))


REPLIES: Mapping[str, Callable[[ServerConfig, Store], Reply]] = {"slack": _slack,
                                                                 "github": _github}


@contextmanager
def answering(state: State, store: Store, config: ServerConfig) -> Iterator[Answerer]:
    """An `Answerer` thread for the server's lifetime (first it carries out what an earlier
    server left behind)."""
    answerer = Answerer(store, config.project, config.exposure, replies(config, store))
    stop = threading.Event()
    thread = threading.Thread(target=answerer.serve, args=(stop,), daemon=True,
                              name="waypost-answers")
    state.answerer = answerer
    thread.start()
    try:
        yield answerer
    finally:
        stop.set()
        answerer.wake()
        thread.join(STOP_WAIT)


class Handed(NamedTuple):
    """What became of an answer handed over."""

    accepted: bool  # stored, to be carried out (False: refused now, or stored before)
    refusal: Outcome | None = None  # refused now, before anything was stored: why


def hand_over(state: State, store: Store, answer: Answer, *, show: bool = True) -> Handed:
    """Decide a signed, well-formed answer by the run's rules as it stands: refused, nothing
    is stored and the refusal is shown where the answer came from; else it is stored (once:
    a retried or replayed request's key was stored before, and nothing more happens) and
    the thread woken to carry it out. `show`: False when the door shows a refusal itself
    (`Answerer.show`), or not at all."""
    answerer: Answerer = state.answerer
    refusal = answerer.decide(answer)
    if refusal is not None:
        if show:
            answerer.show(answer, refusal)
        return Handed(accepted=False, refusal=refusal)
    accepted = accept(store, answer)
    answerer.wake()
    return Handed(accepted=accepted)
