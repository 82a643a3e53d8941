"""`evidence run` heartbeats the run while its command runs, so a long test suite does not
make the worker look silent; a takeover during the command stops the beats, the command
finishes, and its record is refused as any fenced write is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from waypost import Kind, Run, StaleLease, start
from waypost.model import StopRules
from waypost.store import Store, open_store
from waypost.system.process import Tick, run_bounded
from waypost.usecases.beats import FASTEST, WITHOUT_RULES, beat_every

SLEEP = "import time; time.sleep(0.6)"


def beats_between(store: Store, run_id: str, first: str, last: str) -> list[str]:
    """The actors of the heartbeats after the last `first` event and before `last`."""
    types = [(e.type, e.actor) for e in store.events(run_id)]
    begin = max(i for i, (t, _) in enumerate(types) if t == first)
    end = max(i for i, (t, _) in enumerate(types) if t == last)
    return [actor for t, actor in types[begin:end] if t == "heartbeat"]


def claimed_run(store: Store, heartbeat_interval: float | None = None) -> Run:
    run, _ = start(store, "long suite", actor="alice", target="none:", max_silence=600,
                   heartbeat_interval=heartbeat_interval, kind=Kind.LONG_RUNNING)
    worker = Run(store, run.id, actor="w1")
    worker.claim()
    return worker


def test_the_command_is_heartbeaten_while_it_runs(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        worker = claimed_run(store)
        packet = worker.record_command([sys.executable, "-c", SLEEP], heartbeat_every=0.1)
        assert beats_between(store, worker.id, "claimed", "evidence_recorded").count("w1") >= 2
        assert packet.evidence[-1].duration_s is not None
        assert packet.evidence[-1].duration_s >= 0.6


def test_a_command_that_closed_its_output_is_heartbeaten_too(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        worker = claimed_run(store)
        worker.record_command(["sh", "-c", "exec >&- 2>&-; sleep 0.6"], heartbeat_every=0.1)
        assert beats_between(store, worker.id, "claimed", "evidence_recorded").count("w1") >= 2


def test_the_cli_heartbeats_at_the_stop_rules_interval(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(str(path)) as store:
        worker = claimed_run(store, heartbeat_interval=0.2)  # a beat every 0.1 s
    done = subprocess.run(
        [sys.executable, "-m", "waypost", "evidence", "run", worker.id, "--as", "w1",
         "--epoch", "1", "--store", str(path), "--json", "--", sys.executable, "-c", SLEEP],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    with open_store(str(path)) as store:
        assert beats_between(store, worker.id, "claimed", "evidence_recorded").count("w1") >= 2


def test_the_owner_running_evidence_sends_no_beat_for_the_worker(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        worker = claimed_run(store)
        owner = Run(store, worker.id, actor="alice")
        owner.record_command([sys.executable, "-c", "import time; time.sleep(0.3)"],
                             heartbeat_every=0.05)
        assert beats_between(store, worker.id, "claimed", "evidence_recorded") == []


def test_a_takeover_stops_the_beats_the_command_finishes_the_record_is_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    marker = tmp_path / "finished"
    with open_store(str(path)) as store:
        worker = claimed_run(store)
        takeover = (f"import time, waypost; s = waypost.open_store({str(path)!r}); "
                    f"time.sleep(0.25); waypost.Run(s, {worker.id!r}, actor='alice').claim(); "
                    f"s.close(); time.sleep(0.4); open({str(marker)!r}, 'w').close()")
        with pytest.raises(StaleLease):
            worker.record_command([sys.executable, "-c", takeover], heartbeat_every=0.05)
        assert marker.exists()  # the command was not cut short
        events = [(e.type, e.actor) for e in store.events(worker.id)]
        taken = events.index(("claimed", "alice"))
        assert ("heartbeat", "w1") in events[:taken]
        assert events[taken + 1:] == []  # no beat, and no record, after the takeover


def test_the_interval_comes_from_the_stop_rules() -> None:
    assert beat_every(StopRules(heartbeat_interval=300)) == 150
    assert beat_every(StopRules(max_silence=1800)) == WITHOUT_RULES
    assert beat_every(StopRules(max_silence=40)) == 10
    assert beat_every(StopRules()) == WITHOUT_RULES
    assert beat_every(StopRules(heartbeat_interval=0)) == FASTEST


def test_a_tick_is_called_while_the_command_runs_and_its_error_stops_it() -> None:
    calls: list[int] = []
    run_bounded([sys.executable, "-c", SLEEP], timeout=30, max_output=100,
                tick=Tick(call=lambda: calls.append(1), every=0.1))
    assert len(calls) >= 3

    def refuse() -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        run_bounded([sys.executable, "-c", "import time; time.sleep(30)"], timeout=60,
                    max_output=100, tick=Tick(call=refuse, every=0.1))
