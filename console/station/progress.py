"""Progress truth: is anything moving, per station and for the service.

A connection can be ``live`` and ``/health`` answer 200 while no token moves (vLLM removes
``NCCL_ASYNC_ERROR_HANDLING``, so the watchdog may never fire; shared/reference/hangs.md). So beside
the connection state each station gets one of seven words (``console.vocabulary.Progress``):

- ``wedged``: requests running (or waiting) and the generation-token counter
  (``vllm:generation_tokens_total``, ``sglang:generation_tokens_total``) frozen for the window W;
- ``stuck``: a start-up phase that does not advance and no new log line for W while the GPUs are busy
  (the first collective spinning after NCCL init);
- ``out-of-step``: the continuous NCCL RAS watch (console/station/ras_watch.py) saw the ranks stop
  at different collectives, requests or not (the ranks behind are named: ``stragglers``); a rank
  that then died (the watchdog) is the ``consequence``, the ranks behind stay the cause;
- ``peer-down``: this station's engine serves but another rank of the job is gone (its container
  exited with an error, its engine failed, or RAS misses it): the service cannot serve;
- ``stuck`` also when RAS sees every rank frozen in one collective with its GPUs busy;
- ``progressing``: tokens or start-up lines coming; ``idle``: nothing asked of the engine, or no
  engine running; ``unknown``: no way to tell, and the reason (no counter, station not live, not
  judged yet: a counter first read less than W ago and not seen to move says ``judged after 0:30``).

Each verdict carries since-when and its evidence: the counter's value and age, running/waiting, and
per GPU its util and power. Power says only which side spins -- at idle power a kernel polling for a
peer, at high power the GPU computing or spinning hot (wedges at 100 % and ~267 W with the engine
thread on-CPU are reported in the field) -- never that tokens come: the frozen counter is the
verdict. Pure: the facts come from ``StationState`` (``state.progress``, ``state.ras``, kept as
messages come), the clock from the caller. The head's counter speaks for every rank: tensor-parallel
ranks generate together, so a worker of a serving engine is judged by it too.

One owner judges: ``ProgressJudge`` (a job beside the station services in the TUI; ``watch``'s loop
and ``status`` tick it themselves) judges every station and the service once per tick and stores the
``Judgement`` (console/station/verdict.py) on the fleet, ``Stations.judged``, which the dashboard's
banner, serving panel and fleet rows, the flight recorder, ``watch`` and ``status`` all read.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from console.durations import clock
from console.probes.nvidia_smi import GpuReading
from console.serving.metrics import known
from console.station.aspects import Aspect
from console.station.ras_watch import RasView
from console.station.state import Stations, StationState
from console.station.verdict import Judgement, Verdict
from console.vocabulary import (
    CONTAINER_UP_STATES,
    LOADING_PHASES,
    PROGRESS_SEVERITY,
    ContainerState,
    EnginePhase,
    Progress,
    RasState,
)

DEFAULT_WINDOW_S = 30.0
BUSY_UTIL_PCT = 90  # a GPU at or above this is busy (a spinning NCCL kernel reads 96-100 %)
READ_LATE_S = 20.0  # a counter read longer ago than this (or W) proves nothing about now
LOADED_UTIL_PCT = 50  # at or above this, util and power together say spinning or working
#: Idle power known from the model when this session never saw the GPU idle (W; hangs.md: GB10 idles
#: at 18-27 W, eugr/spark-vllm-docker #260).
IDLE_POWER_BY_NAME = {"GB10": 27.0}
#: Busy at no more than idle power x this + SPIN_MARGIN_W: a kernel polling, not computing.
SPIN_FACTOR, SPIN_MARGIN_W = 1.3, 15.0

#: Each start-up phase in the stuck line's words ("stuck in NCCL init for 2:10").
PHASE_WORDS: dict[EnginePhase, str] = {
    EnginePhase.STARTING: "start-up", EnginePhase.CONNECTING: "NCCL init / first collective",
    EnginePhase.LOADING: "weight loading", EnginePhase.LOADED: "start-up after the weights",
    EnginePhase.KV_CACHE: "KV cache allocation", EnginePhase.GRAPHS: "CUDA graph capture"}


def gpu_evidence(state: StationState, now: float) -> list[str]:
    """Per GPU: util and power, and what they mean together ("spinning kernel: busy at idle power")."""
    out: list[str] = []
    old = state.stale(Aspect.GPUS, now)
    for g in state.gpus:
        if not g.name or g.util_pct is None:
            continue
        text = f"{state.name} GPU{g.index} {g.util_pct} %" + ("" if g.power_w is None else f" at {g.power_w:.0f} W")
        if g.util_pct >= LOADED_UTIL_PCT and g.power_w is not None:
            idle = idle_power(state, g)
            if idle is None:
                text += " (idle power not seen yet)"
            elif spinning(g, idle):
                text += f": spinning kernel (busy at idle power, idle {idle:.0f} W)"
            else:  # a wedge spins hot too (100 %, ~267 W, engine thread on-CPU): not a sign of tokens
                text += f": busy at high power (idle {idle:.0f} W): the GPU computes or spins hot; the counter says which"
        if old:
            text += f" (reading {clock(state.value_age(Aspect.GPUS, now) or 0.0)} old)"
        out.append(text)
    return out


def idle_power(state: StationState, g: GpuReading) -> float | None:
    """The GPU's idle power: the lowest seen while idle this session, else its model's, else None."""
    seen = state.progress.idle_power_w.get(g.index)
    if seen is not None:
        return seen
    return next((w for key, w in IDLE_POWER_BY_NAME.items() if key in g.name), None)


def spinning(g: GpuReading, idle: float) -> bool:
    return g.power_w is not None and g.power_w <= idle * SPIN_FACTOR + SPIN_MARGIN_W


def gpus_busy(state: StationState, now: float) -> bool:
    """Any GPU busy in fresh readings (old readings prove nothing about now)."""
    if state.stale(Aspect.GPUS, now):
        return False
    return any(g.util_pct is not None and g.util_pct >= BUSY_UTIL_PCT for g in state.gpus if g.name)


def judge(state: StationState, head: StationState | None, now: float,
          window_s: float = DEFAULT_WINDOW_S, peers: Iterable[StationState] = ()) -> Verdict:
    """One station's progress at ``now``; ``head``: the station whose API's counter speaks for the
    service (the station itself when it is the head); ``peers``: the other stations of the job
    (their GPUs and containers: a rank gone, a job spinning)."""
    v = _judge_alone(state, head, now, window_s)
    e, c = state.engine, state.container
    if e is None or e.phase != EnginePhase.READY or c is None or c.state not in CONTAINER_UP_STATES:
        return v  # the job's words are for an engine that serves
    others = [p for p in peers if p.name != state.name]
    view = state.ras.view(now, busy=any(gpus_busy(s, now) for s in (state, *others)))
    return from_ras(view, v, now) or peer_down(state, others, v) or _with_ras(v, view)


def from_ras(view: RasView, v: Verdict, now: float) -> Verdict | None:
    """The RAS watch's alarm as this station's verdict (the station's own evidence after it), or None."""
    if not view.alarm:
        return None
    ev = (*view.evidence, *v.evidence)
    if view.cause or view.kind == "out-of-step":
        who = view.cause or view.behind
        return Verdict(Progress.OUT_OF_STEP, view.since, view.words, ev, who[0] if who else None,
                       stragglers=who, consequence=view.missing)
    if view.kind == "missing-ranks":
        return Verdict(Progress.PEER_DOWN, view.since, f"{view.words}: the service cannot serve", ev,
                       v.station, consequence=view.missing)
    return Verdict(Progress.STUCK, view.since, f"every rank stuck in one collective ({view.words})", ev, None)


def _with_ras(v: Verdict, view: RasView) -> Verdict:
    """A suspect RAS read joins the evidence (no alarm: one read, or a freeze not yet long enough)."""
    if view.state != RasState.SUSPECT:
        return v
    return replace(v, evidence=(*v.evidence, f"RAS suspect: {view.words}"))


def peer_down(state: StationState, others: list[StationState], v: Verdict) -> Verdict | None:
    """This engine serves while another rank's container, seen running this session, went down with an
    error (exit code, dead, OOM): the job cannot run a collective, so the service cannot serve. (A
    container found down when the console started may be an old run: RAS says whether it is missing.)"""
    for p in sorted(others, key=lambda s: s.rank):
        c = p.container
        if p.conn.down or c is None or p.progress.down_at is None:
            continue  # not read, or not seen to go down: not known to be gone from this job
        if not (c.state == ContainerState.DEAD or c.oom_killed or c.exit_code not in (0, None)):
            continue  # a clean stop
        how = f"container {c.state} ({c.exit_code})"
        since = p.progress.down_at
        words = f"{p.name}'s engine is gone ({how}): this rank's job cannot serve; restart the whole service"
        return Verdict(Progress.PEER_DOWN, since, words, (f"{p.name}: {how}", *v.evidence), state.name,
                       consequence=(p.name,))
    return None


def _judge_alone(state: StationState, head: StationState | None, now: float, window_s: float) -> Verdict:
    """The station's progress from its own facts and the head's counter."""
    name = state.name

    def v(p: Progress, since: float | None, words: str, evidence: Iterable[str] = ()) -> Verdict:
        return Verdict(p, since, words, tuple(evidence), name)

    conn = state.conn
    if conn.down or state.values_stale or (not conn.live and state.seen_at is None):
        why = state.why(now) or f"station {conn.state}"
        return v(Progress.UNKNOWN, None, f"cannot tell: station not live ({why})")
    c, e, f = state.container, state.engine, state.progress
    if c is None:
        return v(Progress.UNKNOWN, None, "cannot tell: the container was not read yet")
    if c.state not in CONTAINER_UP_STATES:
        return v(Progress.IDLE, state.at.get(Aspect.CONTAINER), f"no engine running (container {c.state})")
    if e is None:
        return v(Progress.UNKNOWN, None, "cannot tell: the engine log was not read yet")
    if e.phase == EnginePhase.FAILED:
        return v(Progress.UNKNOWN, f.phase_since, "cannot tell: the engine failed (its log says why)")
    if e.phase == EnginePhase.STOPPED:
        return v(Progress.IDLE, f.phase_since, "no engine running (stopped)")
    if e.phase in LOADING_PHASES:
        return _startup(state, now, window_s, v)
    return _serving(state, head if head is not None else state, now, window_s, v)


def _startup(state: StationState, now: float, window_s: float, v) -> Verdict:
    """Start-up: lines or phases coming is progress; silence with busy GPUs is stuck."""
    f, e = state.progress, state.engine
    assert e is not None
    moved = max((t for t in (f.log_line_at, f.phase_since) if t is not None), default=None)
    where = PHASE_WORDS.get(e.phase, e.label)
    if moved is None or now - moved < window_s:
        return v(Progress.PROGRESSING, f.phase_since, f"starting: {e.label}")
    quiet = now - moved
    evidence = [f"{state.name}: last log line {clock(now - f.log_line_at)} ago" if f.log_line_at is not None
                else f"{state.name}: no log line read", f"{state.name}: in {where} since the phase began "
                f"{clock(now - f.phase_since)} ago" if f.phase_since is not None else f"{state.name}: in {where}"]
    evidence += gpu_evidence(state, now)
    if gpus_busy(state, now):
        return v(Progress.STUCK, moved, f"stuck in {where} for {clock(quiet)}", evidence)
    return v(Progress.UNKNOWN, moved, f"start-up quiet for {clock(quiet)} in {where}, GPUs not busy "
             "(a slow disk, or waiting for a peer?)", evidence)


def _serving(state: StationState, head: StationState, now: float, window_s: float, v) -> Verdict:
    """Serving: the generation-token counter is the heartbeat while requests run."""
    f, snap = head.progress, head.serving
    if snap is None or f.tokens_read_at is None:
        err = f" ({snap.error})" if snap is not None and snap.error else ""
        return v(Progress.UNKNOWN, None, f"cannot tell: no /metrics read from the API yet{err}")
    if f.tokens is None:
        return v(Progress.UNKNOWN, None, "cannot tell: /metrics has no generation-token counter "
                 "(vllm:generation_tokens_total; SGLang needs --enable-metrics)")
    read_age = now - f.tokens_read_at
    if read_age > max(window_s, READ_LATE_S):  # (a round whose health check times out takes its timeout)
        why = f": {snap.error}" if snap.error else ""
        return v(Progress.UNKNOWN, None, f"cannot tell: the counter was last read {clock(read_age)} ago{why}")
    running, waiting = snap.running, snap.waiting
    if (running := known(running)) is None:
        return v(Progress.UNKNOWN, None, "cannot tell: /metrics has no readable running-requests gauge")
    waiting = known(waiting) or 0.0
    reqs = f"{running:.0f} running, {waiting:.0f} waiting"
    moved = f.tokens_moved_at or f.tokens_read_at
    evidence = [f"generation tokens {f.tokens:,.0f}, last moved {clock(now - moved)} ago",
                f"requests: {reqs}"]
    if snap.status == "ok":
        evidence.append(f"{snap.health_path} answers 200")
    evidence += gpu_evidence(state, now)
    if head is not state:
        evidence += gpu_evidence(head, now)
    if f.active_since is None:
        since = max(t for t in (moved, f.quiet_since) if t is not None)
        return v(Progress.IDLE, since, "idle: no request running or waiting", evidence)
    frozen_since = max(moved, f.active_since)
    frozen = now - frozen_since
    if frozen < window_s and not f.seen_moving and f.active_since == f.tokens_first_at:
        # a console opened on requests in flight has not seen one token move yet: it cannot tell
        judged = frozen_since + window_s
        return replace(v(Progress.UNKNOWN, None, f"not judged yet: {reqs}, no token seen moving since the first "
                         f"read {clock(now - (f.tokens_first_at or now))} ago; judged after "
                         f"{clock(window_s)} ({clock(judged - now)} left)", evidence), judged_at=judged)
    if frozen >= window_s:
        return v(Progress.WEDGED, frozen_since, f"wedged for {clock(frozen)}: {reqs}, no token generated "
                 f"(counter frozen at {f.tokens:,.0f})", evidence)
    rate = snap.gen_tok_s
    rate_words = f", {rate:,.0f} tok/s" if rate is not None and rate == rate else ""
    return v(Progress.PROGRESSING, f.active_since, f"generating: {reqs}{rate_words}", evidence)


def job_ras(states: Iterable[StationState], now: float) -> RasView:
    """The fleet's RAS watch at ``now`` (``watch --json``'s ``ras``): busy when any station's GPUs are."""
    every = list(states)
    if not every:
        return RasView(RasState.UNKNOWN, None, "RAS: no station")
    serving = any(s.engine is not None and s.engine.phase == EnginePhase.READY for s in every)
    return every[0].ras.view(now, busy=any(gpus_busy(s, now) for s in every), serving=serving)


def judge_all(states: Iterable[StationState], head: StationState | None, now: float,
              window_s: float = DEFAULT_WINDOW_S) -> dict[str, Verdict]:
    """Every station's verdict, by name."""
    every = list(states)
    return {s.name: judge(s, head, now, window_s, every) for s in every}


def service(verdicts: dict[str, Verdict], head: str | None) -> Verdict:
    """The service's progress: a wedged or stuck station makes it so (the worst, the earliest);
    else the head's word (its counter is the service's heartbeat)."""
    alarms = [x for x in verdicts.values() if x.alarm]
    if alarms:
        worst = max(PROGRESS_SEVERITY[x.state] for x in alarms)
        pick = [x for x in alarms if PROGRESS_SEVERITY[x.state] == worst]
        first = min(pick, key=lambda x: (x.since is None, x.since or 0.0))
        # every rank's GPUs at the same moment: the other stations' readings join the evidence
        more = [e for x in verdicts.values() if x is not first for e in x.evidence
                if " GPU" in e and e not in first.evidence]
        return replace(first, evidence=first.evidence + tuple(more))
    if head is not None and head in verdicts:
        return verdicts[head]
    return Verdict(Progress.UNKNOWN, None, "cannot tell: no station")


def judge_look(state: StationState, head: StationState | None, now: float, window_s: float,
               look_s: float, serving: bool, peers: Iterable[StationState] = ()) -> Verdict:
    """``status``'s one-shot verdict: the live judge over what one look read (the log tail's
    stamps date a silent start-up at once), except that a look shorter than W cannot tell a
    wedge: a counter that did not move during it with requests running says so, and points at
    ``watch``. ``serving``: the API answered healthy (the engine log is then not read: the
    counter is what speaks; ``peers``: every station read, a rank gone among them)."""
    v = judge(state, head, now, window_s, peers)
    if v.state == Progress.UNKNOWN and state.engine is None and serving and state.conn.live:
        v = _serving(state, head if head is not None else state, now, window_s,
                     lambda p, since, words, ev=(): Verdict(p, since, words, tuple(ev), state.name))
    f = (head or state).progress
    counted = state.engine is None or state.engine.phase not in LOADING_PHASES  # judged by the counter
    watching = v.state == Progress.PROGRESSING or (v.state == Progress.UNKNOWN and v.judged_at is not None)
    # a counter frozen from the first read to the last for less than W is no wedge, however late the
    # judgement comes (status reads RAS after the look: on a slow machine "now" runs past W since the
    # first read, but nothing was read in between to say the counter stayed frozen)
    unproven = (v.state == Progress.WEDGED and f.tokens_read_at is not None and f.active_since is not None
                and f.tokens_read_at - max(f.tokens_moved_at or f.tokens_read_at, f.active_since) < window_s)
    if (watching or unproven) and counted and f.tokens_read_at is not None:
        if f.tokens_moved_at == f.active_since or unproven:  # no move seen during the look
            return Verdict(Progress.UNKNOWN, None, f"no token moved in a {look_s:.1f} s look with requests running; "
                           f"a wedge shows after {clock(window_s)} of it (dgx-console watch)", v.evidence, state.name)
    return v


JUDGE_EVERY_S = 0.5  # the TUI's judge tick: a wedge shows by time passing, not by a message


def judgement(verdicts: dict[str, Verdict], head: str | None, at: float) -> Judgement:
    """Every station's verdict and the service's drawn from them, judged at ``at``."""
    return Judgement(at, verdicts, service(verdicts, head))


class ProgressJudge:
    """The one judge of a fleet's progress: each tick judges every station and the service once and
    stores the judgement on the fleet (``Stations.judged``) for every reader. In the TUI it runs as a
    supervised job (``run``) that ticks every ``every_s`` and at once after ``soon()`` (a new counter
    or RAS read); ``watch`` ticks it on its own interval, ``status`` asks it for its one ``look``."""

    def __init__(self, stations: Stations, window_s: float = DEFAULT_WINDOW_S, every_s: float = JUDGE_EVERY_S) -> None:
        self.stations, self.window_s, self.every_s = stations, window_s, every_s
        self._wake = asyncio.Event()

    def tick(self, now: float) -> Judgement:
        """Judge every station and the service at ``now``; stored on the fleet and returned."""
        fleet = self.stations
        j = judgement(judge_all(fleet.values(), fleet.head, now, self.window_s), fleet.head_name, now)
        fleet.judged = j
        return j

    def look(self, now: float, look_s: float, serving: bool) -> Judgement:
        """``status``'s one judgement over what one look of ``look_s`` read (``judge_look``); stored too."""
        fleet, every = self.stations, list(self.stations.values())
        verdicts = {s.name: judge_look(s, fleet.head, now, self.window_s, look_s, serving, every) for s in every}
        fleet.judged = j = judgement(verdicts, fleet.head_name, now)
        return j

    def soon(self) -> None:
        """Judge at the next turn of the loop, not at the next tick (a new read: a burst is one judgement)."""
        self._wake.set()

    async def run(self, on_judged: Callable[[Judgement], object], now: Callable[[], float] = time.time) -> None:
        """The job: a tick every ``every_s`` (or at once after ``soon``), each told to ``on_judged``."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.every_s)
            self._wake.clear()
            on_judged(self.tick(now()))
