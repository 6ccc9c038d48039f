"""What the operator would see, measured from outside: ``dgx-console watch --json --logs`` as a
subprocess, its NDJSON read as it arrives; and numbered log lines written into a station's
container log, to count what was lost or duplicated. Shared by the lab tests and
bench/fault_recovery.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from console.sim.world import World, append_log

ROOT = Path(__file__).resolve().parents[2]
SEQ = re.compile(r"\brun=(\w+) seq=(\d+)\b")


class Watch:
    """``dgx-console watch --json --logs`` running against a config; every object kept with its arrival."""

    def __init__(self, config_path: Path, interval: float = 0.25, extra: tuple[str, ...] = ()):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "watch", "--json", "--logs", "--interval", str(interval),
             "--config", str(config_path), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, bufsize=1)
        self.samples: list[dict] = []  # station objects, in order
        self.logs: dict[str, list[str]] = {}
        self.bad: list[str] = []
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                self.bad.append(raw)
                continue
            with self._cv:
                if "log" in obj:
                    self.logs.setdefault(obj["station"], []).append(obj["log"])
                else:
                    obj["_seen"] = time.time()
                    self.samples.append(obj)
                self._cv.notify_all()

    def wait(self, pred, timeout: float, what: str):
        """The first value ``pred()`` returns that is not None, within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                got = pred()
                if got is not None:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    err = self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else ""
                    last = [(s["station"], s["state"], s["sample_age_s"]) for s in self.samples[-6:]]
                    raise AssertionError(f"watch: {what} not seen within {timeout:g} s; last: {last} {err[-400:]}")
                self._cv.wait(min(left, 0.2))

    def first_state(self, station: str, states: tuple[str, ...], after: float, timeout: float) -> dict:
        """The first object of ``station`` emitted after wall time ``after`` in one of ``states``."""
        def find():
            for s in self.samples:
                if s["station"] == station and s["t"] >= after and s["state"] in states:
                    return s
            return None

        return self.wait(find, timeout, f"{station} in {states}")

    def between(self, station: str, t0: float, t1: float) -> list[dict]:
        with self._cv:
            return [s for s in self.samples if s["station"] == station and t0 <= s["t"] <= t1]

    def seqs(self, station: str, run: str) -> list[int]:
        """The numbers of run ``run``'s numbered lines, in the order they arrived."""
        with self._cv:
            return [int(m.group(2)) for ln in self.logs.get(station, []) if (m := SEQ.search(ln)) and m.group(1) == run]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)


class NumberedLog:
    """A thread writing ``seq=N`` lines into a simulated container's log at ``rate`` lines/s."""

    def __init__(self, world: World, station: str, rate: float = 20.0):
        import secrets

        self.world, self.station, self.rate = world, station, rate
        self.run = secrets.token_hex(4)  # a run's lines are told apart from earlier runs' in the same log
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.written < due:
                self.written += 1
                append_log(self.world, self.station, f"INFO request done run={self.run} seq={self.written}")
            self._stop.wait(1 / self.rate)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.written


def lost_and_duplicated(seen: list[int], written: int) -> tuple[int, int]:
    """Numbers 1..written never seen, and numbers seen more than once."""
    counts = Counter(seen)
    lost = sum(1 for n in range(1, written + 1) if n not in counts)
    dup = sum(c - 1 for c in counts.values() if c > 1)
    return lost, dup


def measure_outage(lab, fault, repair, settle_s: float = 8.0) -> dict:
    """``fault()`` then, ``settle_s`` later, ``repair()`` on station B of a running lab, under a
    watch with numbered log lines on B: detection and recovery times as ``watch --json`` shows them,
    A's samples meanwhile, and the numbered lines lost and duplicated."""
    lab.start_containers()
    log = NumberedLog(lab.world, "B")
    w = Watch(lab.config_path())
    try:
        w.first_state("B", ("live",), 0, 60)
        w.first_state("A", ("live",), 0, 60)
        w.wait(lambda: True if len(w.seqs("B", log.run)) >= 10 else None, 30, "numbered lines on B")
        t_cut = time.time()
        fault()
        down = w.first_state("B", ("stale", "unreachable"), t_cut, 30)
        time.sleep(settle_s)
        t_fix = time.time()
        repair()
        back = w.first_state("B", ("live",), t_fix, 30)
        a_during = w.between("A", t_cut, back["t"])
        written = log.stop()
        w.wait(lambda: True if written in w.seqs("B", log.run) else None, 30, f"seq={written} on B")
        lost, dup = lost_and_duplicated(w.seqs("B", log.run), written)
        return {"detect_s": down["t"] - t_cut, "recover_s": back["t"] - t_fix, "down": down,
                "a_during": a_during, "lost": lost, "dup": dup, "written": written, "logs": w.logs.get("B", [])}
    finally:
        log.stop()
        w.stop()
