"""The flight recorder's pure parts and the ledger: claims, stalls, pruning, two processes, the
window's bounds, the detector's incidents and stalls."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from console.commands.incidents import parse_since
from console.errors import UsageError
from console.incidents.capture import CLIP, bound
from console.incidents.detector import INCIDENT_KINDS, Closed, Detector, Opened, StallSeen
from console.incidents.store import Ledger
from console.incidents.window import Window
from console.probes.nvidia_smi import GpuReading
from console.sim.stall_cycle import frozen
from console.station.messages import GpuSample
from console.station.progress_facts import ProgressFacts
from console.station.verdict import Verdict
from console.vocabulary import Progress


def test_a_second_console_joins_the_open_incident_and_does_not_own_it(tmp_path):
    a = Ledger(tmp_path / "l.sqlite3")
    first = a.open_incident("svc", "wedge", 1000.0, ["A", "B"], "wedged", "restart")
    assert first.owner
    a.update(first.id, bundle=str(a.bundles / "x.tar.gz"), bundle_bytes=10)
    code = (f"from console.incidents.store import Ledger; c = Ledger({str(tmp_path / 'l.sqlite3')!r})"
            ".open_incident('svc', 'wedge', 1002.0, ['A'], 'w', 'n'); print(c.id, c.owner, c.other)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == [str(first.id), "False"] and "captured" in " ".join(out)
    assert len(a.incidents()) == 1
    a.close_incident(first.id, 1100.0)
    assert a.open_incident("svc", "wedge", 1200.0, ["A"], "w", "n").id != first.id  # the next one is new


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "l.sqlite3"
    Ledger(path).incidents()
    code = ("import sys; from console.incidents.store import Ledger; l = Ledger(sys.argv[1]); k = int(sys.argv[2])\n"
            "for i in range(40): l.add_stall(f'svc{k}', 100.0 * i, 9.0, ['A'], 4)\n"
            "for i in range(10): l.open_incident(f'svc{k}', 'wedge', 1000.0 * i, ['A'], 'w', 'n')")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(k)]) for k in (1, 2)]
    assert [p.wait(60) for p in procs] == [0, 0]
    led = Ledger(path)
    assert len(led.stalls()) == 80 and len(led.incidents()) == 20


def test_two_consoles_opening_the_same_incident_at_once_make_one_row_with_one_owner(tmp_path):
    """Many rounds of two processes racing for the same incident: one row each round, one owner."""
    path = tmp_path / "l.sqlite3"
    Ledger(path).incidents()
    # both stay alive to the end (a console that ended before it captured is taken over, rightly)
    code = ("import os, sys, time; from console.incidents.store import Ledger; l = Ledger(sys.argv[1])\n"
            "d, k = sys.argv[2], sys.argv[3]\n"
            "def meet(word):\n"
            "    open(os.path.join(d, word + k), 'w').close()\n"
            "    while not all(os.path.exists(os.path.join(d, word + j)) for j in '12'): time.sleep(0.01)\n"
            "meet('ready')\n"
            "for i in range(30):\n"
            "    c = l.open_incident('svc', 'wedge', 10000.0 * i, ['A'], 'w', 'n'); print(i, c.id, int(c.owner))\n"
            "    l.add_stall('svc', 10000.0 * i + 500, 9.0, ['A'], 4)\n"
            "    l.update(c.id, note=f'seen by {k}')\n"
            "    l.add_action(c.id, 'captured' if c.owner else 'skipped')\n"
            "meet('done')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(tmp_path), k], stdout=subprocess.PIPE,
                              text=True) for k in "12"]
    outs = [p.communicate(timeout=90)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    seen: dict[str, list[tuple[int, int]]] = {}
    for out in outs:
        for line in out.split("\n"):
            if line:
                i, iid, owner = line.split()
                seen.setdefault(i, []).append((int(iid), int(owner)))
    assert len(seen) == 30
    for pair in seen.values():
        assert pair[0][0] == pair[1][0] and sorted(o for _, o in pair) == [0, 1], pair  # same row, one owner
    led = Ledger(path)
    rows = led.incidents()
    assert len(rows) == 30 and all(set(r.action.split(", ")) == {"captured", "skipped"} for r in rows), rows[:2]
    assert len(led.stalls()) == 30  # the same stall from both: recorded once
    import sqlite3
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_a_write_waits_for_the_host_lock_and_gives_up_with_one_line(tmp_path):
    """Another console holding the file lock holds every write of this one (and a lock held too long
    is a ledger error, not a hang)."""
    import fcntl
    import os
    import threading

    from console.incidents import store

    path = tmp_path / "l.sqlite3"
    led = Ledger(path)
    led.incidents()
    fd = os.open(store.lock_path(path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()

    def write() -> None:
        led.add_stall("svc", 1.0, 9.0, ["A"], 4)
        done.set()

    t = threading.Thread(target=write)
    t.start()
    try:
        assert not done.wait(0.6)  # held by the lock
        assert led.stalls() == []  # reads are not held
    finally:
        os.close(fd)
    assert done.wait(10)
    t.join()
    assert len(led.stalls()) == 1
    fd = os.open(store.lock_path(path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(store.LedgerError, match="held its lock"):
            with store.host_lock(path, timeout_s=0.2):
                pass
    finally:
        os.close(fd)


def test_pruning_removes_the_oldest_bundles_and_says_so(tmp_path):
    led = Ledger(tmp_path / "l.sqlite3")
    led.bundles.mkdir(parents=True)
    ids = []
    for k in range(4):
        c = led.open_incident("svc", "wedge", 1000.0 * k, ["A"], "w", "n")
        f = led.bundles / f"b{k}.tar.gz"
        f.write_bytes(b"x" * 1000)
        led.update(c.id, bundle=str(f), bundle_bytes=1000)
        led.close_incident(c.id, 1000.0 * k + 50)
        ids.append(c.id)
    outside = tmp_path / "keep.tar.gz"
    outside.write_bytes(b"x")
    said = led.prune(max_incidents=3, max_bundle_bytes=2000)
    assert len(led.incidents()) == 3 and led.get(ids[0]) is None
    assert not (led.bundles / "b0.tar.gz").exists() and not (led.bundles / "b1.tar.gz").exists()
    assert (led.bundles / "b3.tar.gz").exists() and outside.exists()
    assert "pruned" in led.get(ids[1]).note and led.get(ids[1]).bundle is None
    assert any("removed" in s for s in said) and any("pruned" in s for s in said)


def test_a_newer_schema_is_refused_with_one_line(tmp_path):
    import sqlite3

    from console.incidents.store import LedgerError
    path = tmp_path / "l.sqlite3"
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version=99")
    con.close()
    with pytest.raises(LedgerError, match="newer"):
        Ledger(path).incidents()


def v(state: Progress, since: float | None = None, station: str = "A") -> Verdict:
    return Verdict(state, since, f"{state} words", (), station)


def test_the_detector_opens_once_and_closes_on_progress():
    d = Detector(30.0, ("A", "B"))
    assert d.step(v(Progress.PROGRESSING), {"A": v(Progress.PROGRESSING)}, None, None, 1.0) == []
    opened = d.step(v(Progress.WEDGED, 10.0), {"A": v(Progress.WEDGED, 10.0), "B": v(Progress.PROGRESSING)},
                    None, None, 41.0)
    assert opened == [Opened("wedge", 10.0, ("A",), "wedged words", opened[0].next_step)]
    assert d.step(v(Progress.WEDGED, 10.0), {}, None, None, 42.0) == []
    assert d.step(v(Progress.UNKNOWN), {}, None, None, 43.0) == []  # the API late is not the end
    assert d.step(v(Progress.PROGRESSING), {}, None, None, 44.0) == [Closed("wedge", 44.0)]
    assert INCIDENT_KINDS["stuck"] == "stuck"


def test_a_station_that_turns_alarmed_later_widens_the_open_incident(tmp_path):
    from console.incidents.detector import Widened

    d = Detector(30.0, ("A", "B"))
    d.step(v(Progress.STUCK, 10.0), {"A": v(Progress.PROGRESSING), "B": v(Progress.STUCK, 10.0)}, None, None, 41.0)
    assert d.open is not None and d.open.stations == ("B",)
    assert d.step(v(Progress.STUCK, 10.0), {"A": v(Progress.STUCK, 11.0), "B": v(Progress.STUCK, 10.0)},
                  None, None, 42.0) == [Widened("stuck", ("A", "B"))]
    assert d.step(v(Progress.STUCK, 10.0), {"A": v(Progress.STUCK, 11.0)}, None, None, 43.0) == []  # no narrowing
    led = Ledger(tmp_path / "l.sqlite3")
    c = led.open_incident("svc", "stuck", 10.0, ["B"], "stuck", "restart")
    led.add_stations(c.id, ("A", "B"))
    led.add_stations(c.id, ("B",))
    assert led.get(c.id).stations == ("B", "A")


def test_a_new_alarm_value_is_one_line_in_the_table(monkeypatch):
    monkeypatch.setitem(INCIDENT_KINDS, "desynced", "desync")
    d = Detector(30.0, ("A",))
    fake = Verdict("desynced", 5.0, "ranks apart", (), "A")  # type: ignore[arg-type]
    assert isinstance(d.step(fake, {"A": fake}, None, None, 9.0)[0], Opened)


def facts(moved: float, read: float, active: float | None = 0.0) -> ProgressFacts:
    return ProgressFacts(tokens=1.0, tokens_read_at=read, tokens_moved_at=moved, active_since=active)


def test_a_freeze_that_heals_is_a_stall_and_one_that_wedges_is_not():
    d = Detector(30.0, ("A", "B"))
    got = []
    t = 0.0
    for t in range(2, 21, 2):  # moving every poll
        got += d.step(v(Progress.PROGRESSING), {}, facts(t, t), 4, t)
    for t in range(22, 34, 2):  # frozen 12 s
        got += d.step(v(Progress.PROGRESSING), {}, facts(20, t), 4, t)
    got += d.step(v(Progress.PROGRESSING), {}, facts(34, 34), 4, 34)
    stalls = [e for e in got if isinstance(e, StallSeen)]
    assert len(stalls) == 1 and 11 <= stalls[0].seconds <= 13 and stalls[0].stations == ("A", "B")
    assert stalls[0].running == 4
    for t in range(36, 80, 2):  # a wedge: the incident, then the counter moves again: no stall
        verdict = v(Progress.WEDGED, 34) if t - 34 >= 30 else v(Progress.PROGRESSING)
        got += d.step(verdict, {"A": verdict}, facts(34, t), 4, t)
    got += d.step(v(Progress.PROGRESSING), {}, facts(80, 80), 4, 80)
    assert [type(e) for e in got].count(StallSeen) == 1 and any(isinstance(e, Opened) for e in got)
    # no requests through the gap: idle, not a stall
    d2 = Detector(30.0, ("A",))
    d2.step(v(Progress.IDLE), {}, facts(0, 0, None), 0, 0)
    assert not d2.step(v(Progress.PROGRESSING), {}, facts(12, 12, 11.0), 1, 12)


def test_the_window_keeps_its_bounds_and_merges_stations_by_time():
    w = Window(keep_s=60.0, max_bytes=20_000)
    g = [GpuReading(0, "u", "GB300", 1000, 2000, 100, 50, 95.0)]
    for t in range(0, 300):
        w.note(GpuSample("A", g, 1000.0 + t))
        w.note(GpuSample("B", g, 1000.5 + t))
    lo, hi = w.span()
    assert hi - lo <= 61 and w.encoded_bytes() <= 40_000
    lines = [json.loads(x) for x in w.lines(1270.0)]
    assert [x["t"] for x in lines] == sorted(x["t"] for x in lines) and {x["station"] for x in lines} == {"A", "B"}
    assert lines[0]["gpus"][0] == {"i": 0, "util": 100, "mem_mib": 1000, "mem_total_mib": 2000, "power_w": 95.0,
                                   "temp_c": 50}


def test_bound_clips_each_member_and_the_whole():
    out = bound({"a": b"x" * 100, "b": b"y" * 50}, per_member=80, total=100)
    assert out["a"].endswith(CLIP) and sum(map(len, out.values())) <= 100 + len(CLIP)


def test_stall_cycle_freezes_8_to_15_s_about_every_45_s():
    assert frozen(5.0) == (0.0, False)
    assert frozen(12.0) == (2.0, True) and frozen(19.0) == (8.0, False)
    assert frozen(10 + 45 + 5)[1] and frozen(10 + 45 + 13)[0] == 8 + 12


def test_since_takes_ages_dates_and_refuses_words():
    now = time.time()
    assert abs(parse_since("2h", now) - (now - 7200)) < 1e-6
    assert parse_since("2026-12-05") > 0
    with pytest.raises(UsageError):
        parse_since("yesterday")
