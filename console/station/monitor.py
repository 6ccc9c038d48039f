"""Per-station monitoring service: watches one station through its session and never lies about it.

One supervised asyncio task tree per station. Streams replace polling, so watching a station starts
a handful of remote processes on four long-lived channels (``remote/channels.py``: the dashboard's
slots; on-demand jobs keep theirs): ``nvidia-smi -lms``; the station loop (the compute-apps loop,
``docker events`` and a builtin-only meminfo loop, multiplexed by one bash); ``docker logs -f``; the
health channel (``health_streams.py``). Truth about the connection comes from the samples, not
from SSH: the station is ``live`` only while its GPU samples arrive, ``stale`` after max(3 s, 3 x
the interval) of silence (values kept, with their age) or when the GPU samples alone stop while the
other streams answer (a hung nvidia-smi: that source is named, the connection kept), and declared
dead after twice that of silence on every stream: the
connection is dropped and re-opened without waiting for SSH keepalive. While it is down a TCP
probe runs every second, so it is live again within seconds of coming back; only repeated login
refusals back off (the console's one back-off table, ``AUTH_SLOWER``: console/supervisor.py) and a
host-key refusal is looked at again every ``HOSTKEY_RECHECK_S``. Anything unexpected becomes an ``error`` state with its reason and
the service restarts. The container log is the station's ``LogStream`` (console/station/logstream.py:
``--since`` resume, boundary de-duplication, interruption marker, one classification per batch); the
service runs it as two of its jobs and is its owner (the tracker, the ``LogBatch`` messages), and a
launch subscribes to the same stream (``logs``) instead of following the log a second time.
One dead station never blocks another.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import replace

import psutil
from textual.message import Message

from console.config import Config, Station, masker
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi
from console.probes.engine_log import EngineLogTracker
from console.probes.meminfo import HostMemory, parse_meminfo
from console.remote import channels, cmdlines
from console.remote.session import make_transport
from console.remote.transport import (
    AuthRefused,
    ChannelRefused,
    CommandTimeout,
    HostKeyError,
    Transport,
    TransportError,
    Unreachable,
    ssh_of,
    tcp_probe,
)
from console.sanitize import one_line
from console.station.aspects import HOSTMEM_EVERY_S, Aspect, stale_after_s
from console.station.health_streams import HealthStreams
from console.station.logstream import LogStream
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.supervisor import Backoff
from console.tasks import cancel_and_wait
from console.vocabulary import ENDED_PHASES, ConnState, ContainerState, EnginePhase

WATCHDOG_TICK_S = 0.25
PROBE_EVERY_S = 1.0
PROBE_TIMEOUT_S = 1.5
STREAM_QUICK_END_S = 5.0  # a stream that ended sooner ended "at once": it is restarted slower each time (the table)
GPU_PROBE_S = 1.0  # while nvidia-smi answers only with an error, it is asked again this often (back within ~1 s)
GPU_LATE_DETAIL = "nvidia-smi not answering; SSH fine"  # StationState.why: "GPU samples stale 12 s: " + this
HOSTKEY_RECHECK_S = 30.0
TOOL_RETRY_S = 5.0  # a tool of the station loop that ended (docker restarted, a driver error) is asked again
STREAM_ENDED = "@@end"  # the multiplexing loops' word for "this tool ended"
INITIAL_GPU_LIMIT_S = 5  # the first GPU round (a reconnect's too): a hung nvidia-smi is killed after this


def dead_after_s(interval_s: float) -> float:
    """Silence after which the connection is declared dead and re-opened (twice the stale limit,
    never under 6 s: a dropped connection costs a reconnect)."""
    return max(6.0, 2.0 * stale_after_s(interval_s))


class StationSilent(Unreachable):
    """No sample arrived for the dead limit: the path is gone even if TCP has not noticed."""


class StationService:
    """Streams one station's GPUs, host memory, container state and logs as messages."""

    def __init__(self, config: Config, station: Station, post: Callable[[Message], object],
                 transport: Transport | None = None, gpu_interval_ms: int | None = None):
        self.config = config
        self.station = station
        self.post = post
        self.transport = transport or make_transport(station, config.connect_timeout_s, config.command_timeout_s)
        self.gpu_interval_ms = gpu_interval_ms or config.ui.refresh_ms
        self.stale_after = stale_after_s(self.gpu_interval_ms / 1000)
        self.dead_after = dead_after_s(self.gpu_interval_ms / 1000)
        self.unified = config.profile.gpu.unified_memory
        self.tracker = EngineLogTracker(config.profile.engine, head=station.is_head)
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._gpu_count: int | None = None  # unknown until a first GPU round was read
        self._apps: dict[int, tuple[smi.ComputeApp, float]] = {}
        self._wake = asyncio.Event()
        self.state: ConnState = "connecting"
        self.detail = ""
        self.last_error = ""
        self.last_traceback = ""  # of the last unexpected error (for a bug report)
        self.last_sample_at: float | None = None  # wall time of the last sample of any stream
        self.next_try_at: float | None = None
        self.restarts = 0  # supervised restarts after an unexpected error
        self._beat = time.monotonic()  # the last sample of any stream: the connection's heartbeat
        self._gpu_beat = self._beat  # the last answer of nvidia-smi (readings or an error): live or not
        # nvidia-smi has answered since this connection began; until it has, the station is not live
        # (its GPU values are from before), and once a GPU round went unanswered it is stale (GPU named)
        self._gpu_answered, self._gpu_unanswered = False, False
        self._gpu_failing = False  # its last answer was an error (driver, NVML): asked again every GPU_PROBE_S
        self._late: str | None = None  # the source named in the current stale state
        self._auth_backoff = Backoff(auth=True)  # refused logins in a row (a live station starts it over)
        self._error_backoff = Backoff()  # unexpected errors in a row (the same)
        self.health_streams = HealthStreams(self)
        # the container log: followed once, read by this service and by any launch (subscribe)
        self.logs = LogStream(station, self.transport, config.ui.log_lines, refresh=self._refresh_container,
                              on_batches=self._logs_flushed, on_stopped=self._engine_stopped,
                              last_heard=lambda: self.last_sample_at, mask=masker(config))

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        """Run the service as a task of its own (tests; the app and ``watch`` run ``run`` as a job of
        their supervisor: console/station/services.py)."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"station-{self.station.name}")

    async def run(self) -> None:
        """The station's own supervisor loop (connect, stream, every failure a state, retry) until
        cancelled or stopped."""
        await self._supervise()

    def show_failure(self, detail: str, retry_in_s: float, trace: str = "") -> None:
        """The job running ``run`` died (its owner restarts it in ``retry_in_s``): the station's
        ``error`` state says why."""
        self.restarts += 1
        self.last_traceback = trace or self.last_traceback
        self._set_state("error", detail, next_try_at=time.time() + retry_in_s)

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._stopping = True
        if task:
            await cancel_and_wait([task])
        await self.transport.close()

    def retry_now(self) -> None:
        """Skip the current wait (after trusting a key, or on the operator's request)."""
        self._wake.set()

    def _set_state(self, state: ConnState, detail: str = "", next_try_at: float | None = None,
                   host_key: HostKeyError | None = None, late: str | None = None) -> None:
        self.state, self.detail, self.next_try_at, self._late = state, detail, next_try_at, late
        self.post(ConnectionState(self.station.name, state, detail, last_sample_at=self.last_sample_at,
                                  next_try_at=next_try_at, host_key=host_key, late=late))

    def _where(self) -> str:
        return self.station.host + (f":{self.station.port}" if self.station.port else "")

    def _heard(self, gpu: bool = False) -> None:
        """A sample arrived (``gpu``: from nvidia-smi): the connection is there; live again if the
        GPU samples are fresh too."""
        self._beat = time.monotonic()
        if gpu:
            self._gpu_beat = self._beat
            self._gpu_answered = True
        self.last_sample_at = time.time()
        self._judge()

    def _judge(self) -> None:
        """Live only while the GPU samples are fresh. Stale when every stream is silent (values kept,
        with their age), or when the GPU samples alone are late while the rest answers: that source
        is named (the connection is fine, so it is not dropped for it)."""
        now = time.monotonic()
        silent, gpu_silent = now - self._beat, now - self._gpu_beat
        if silent <= self.stale_after and not self._gpu_answered:  # the GPUs not read on this connection yet
            if self._gpu_unanswered and (self.state != ConnState.STALE or self._late != Aspect.GPUS):
                self._set_state("stale", GPU_LATE_DETAIL, late=Aspect.GPUS)
            return
        if silent > self.stale_after:
            if self.state == ConnState.LIVE or self._late is not None:
                self._set_state("stale", f"no sample for {silent:.0f} s")
        elif gpu_silent > self.stale_after:
            if self.state != ConnState.STALE or self._late != Aspect.GPUS:
                self._set_state("stale", GPU_LATE_DETAIL, late=Aspect.GPUS)
        elif self.state != ConnState.LIVE:
            self._auth_backoff.reset()
            self._error_backoff.reset()
            self._set_state("live")

    # ------------------------------------------------------------------ supervisor

    async def _supervise(self) -> None:
        while not self._stopping:
            self._gpu_answered = self._gpu_unanswered = False  # this connection's GPU reads start now
            if self.state not in ("unreachable", "stale"):  # retrying after an outage stays "unreachable"
                self._set_state("connecting", self._where())
            began = time.monotonic()
            try:
                await self._initial()
                await self._run_streams()
                raise Unreachable(f"{self.station.name}: streams ended")
            except asyncio.CancelledError:
                raise
            except HostKeyError as exc:
                state: ConnState = "host-key-changed" if exc.changed else "host-key-unknown"
                self._set_state(state, str(exc), host_key=exc)
                await self._sleep(HOSTKEY_RECHECK_S)
            except AuthRefused as exc:
                delay = self._auth_backoff.failed(time.monotonic() - began)
                await self._pause(delay, "unreachable", str(exc))
            except TransportError as exc:
                self._set_state("unreachable", one_line(str(exc), 300))
                await self._until_reachable(one_line(str(exc), 300))
            except Exception as exc:  # a bug or an output we did not expect: visible, then a restart
                self.restarts += 1
                self.last_traceback = traceback.format_exc()
                delay = self._error_backoff.failed(time.monotonic() - began)
                await self._pause(delay, "error", one_line(f"{type(exc).__name__}: {exc}", 300))

    async def _sleep(self, delay: float) -> bool:
        """Wait ``delay`` s or until ``retry_now``; True when woken."""
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), delay)
            return True
        except TimeoutError:
            return False

    async def _pause(self, delay: float, state: ConnState, detail: str) -> None:
        self._set_state(state, detail, next_try_at=time.time() + delay)
        await self._sleep(delay)

    async def _until_reachable(self, detail: str) -> None:
        """Probe often while the station is down (a TCP connect each second): reconnect as soon as
        something answers there again, or at once on ``retry_now``."""
        ssh = ssh_of(self.transport)
        if ssh is None:
            await self._pause(PROBE_EVERY_S, "unreachable", detail)
            return
        while True:
            t0 = time.monotonic()
            self._set_state("unreachable", detail, next_try_at=time.time() + PROBE_EVERY_S)
            if await tcp_probe(ssh.station.host, ssh.port, PROBE_TIMEOUT_S):
                return
            if await self._sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - t0))):
                return

    async def _initial(self) -> None:
        """One-shot reads so the first frame has numbers before any stream delivers (together:
        coming back after an outage, every round trip counts)."""
        gpus = asyncio.ensure_future(self._initial_gpus())
        try:
            await self._refresh_container()
            self._heard()  # docker answered over SSH: the station is there (a hung GPU tool is the GPU's problem)
            await gpus
        finally:
            await cancel_and_wait([gpus])

    async def _initial_gpus(self) -> None:
        """One GPU round. A wedged nvidia-smi is the GPU source's problem, never the station's: it is
        killed station-side after ``INITIAL_GPU_LIMIT_S`` and the streams start all the same."""
        limit = INITIAL_GPU_LIMIT_S
        try:
            res = await self.transport.run(cmdlines.gpu_query(limit_s=limit), timeout=limit + 5)
        except CommandTimeout:
            self._gpu_unanswered = True
            self._post_gpus([], error=smi.not_answering(limit), answered=False)
            return
        if res.exit_status == cmdlines.KILLED_STATUS and not res.stdout.strip():
            self._gpu_unanswered = True
            self._post_gpus([], error=smi.not_answering(limit), answered=False)
            return
        try:
            gpus = smi.parse_gpus(res.stdout)
        except ParseError as exc:
            self._post_gpus([], error=str(exc))
        else:
            self._gpu_count = max(1, len(gpus))
            if gpus:
                self._post_gpus(gpus)
            self._heard(gpu=True)  # nvidia-smi answered: the GPU source is fresh too

    async def _refresh_container(self) -> docker_probe.ContainerInfo:
        res = await self.transport.run(cmdlines.docker_inspect(self.station.container))
        try:
            info = docker_probe.parse_inspect(self.station.container, res.stdout, res.exit_status)
        except ParseError as exc:
            info = docker_probe.ContainerInfo(self.station.container, ContainerState.ABSENT)
            self.last_error = str(exc)
        self.logs.container(info)
        self.post(ContainerUpdate(self.station.name, info))
        return info

    async def _run_streams(self) -> None:
        self._beat = self._gpu_beat = time.monotonic()
        jobs: list[Awaitable[None]] = [
            self._forever(self._gpu_stream, fast=lambda: self._gpu_failing),
            # the process list (p; GB10's memory, which nvidia-smi reads as [N/A]), the container's
            # events and host memory: one channel
            self._forever(self._station_stream),
            self.logs.follow(),
            self.logs.flush_every(),
            self._watchdog(),
            *self.health_streams.jobs(),  # GPU health, rails, kernel log: one channel
        ]
        if self.station.local:
            jobs.append(self._meminfo_stream())
        # four long-lived channels, all of the dashboard's kind: on-demand jobs keep their own slots
        with channels.watching():
            tasks = [asyncio.create_task(j) for j in jobs]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                exc = t.exception()
                if exc is not None:
                    if isinstance(exc, TransportError):
                        self._drop()  # every channel on it ends now, not after its close times out
                    raise exc
        finally:  # shielded: a second cancel (stop) must not leave a stream running on its own
            await asyncio.shield(cancel_and_wait(tasks))

    def _drop(self) -> None:
        drop = getattr(self.transport, "drop", None)
        if drop is not None:
            drop()

    async def _watchdog(self) -> None:
        """Samples are the heartbeat: stale after ``stale_after`` s of silence, dead after ``dead_after``;
        the GPU samples alone late: stale, that source named (``_judge``)."""
        while True:
            await asyncio.sleep(WATCHDOG_TICK_S)
            silent = time.monotonic() - self._beat
            if silent > self.dead_after:
                raise StationSilent(f"{self.station.name}: no sample for {silent:.0f} s; connection declared "
                                    "dead and dropped")
            self._judge()

    @property
    def gpu_count(self) -> int | None:
        """GPUs in the last round read (None until one was): the health stream sizes its rounds by it."""
        return self._gpu_count

    def forever(self, stream: Callable[[], Awaitable[None]]) -> Awaitable[None]:
        """Run ``stream`` under this service's supervision (restarts with back-off, errors as state)."""
        return self._forever(stream)

    async def _forever(self, stream: Callable[[], Awaitable[None]], fast: Callable[[], bool] | None = None) -> None:
        """Run a stream; when its remote command ends (the connection still up) start it again,
        slower if it keeps ending at once, except while ``fast()``: a tool that answers only with an
        error is asked again every GPU_PROBE_S, so its values are back within a second of it
        answering again. A refused channel is retried, never an outage."""
        backoff = Backoff(healthy_after_s=STREAM_QUICK_END_S)
        while True:
            t0 = time.monotonic()
            with contextlib.suppress(ChannelRefused):
                await stream()
            delay = backoff.failed(time.monotonic() - t0)
            await asyncio.sleep(min(delay, GPU_PROBE_S) if fast is not None and fast() else delay)

    # ------------------------------------------------------------------ streams

    async def _gpu_stream(self) -> None:
        """``nvidia-smi -lms`` prints one line per GPU per interval (a broken GPU's line is an error
        line in its place): ``GpuRounds`` makes rounds of them."""
        rounds = smi.GpuRounds(self._gpu_count)
        async for line in self.transport.stream(cmdlines.gpu_query(self.gpu_interval_ms)):
            try:
                got = rounds.feed(line)
            except ParseError as exc:  # nvidia-smi itself failed (driver, NVML): say so, keep the station
                self._post_gpus([], error=str(exc))
                continue
            if got is not None:
                self._post_gpus(got)

    def _post_gpus(self, gpus: list[smi.GpuReading], error: str | None = None, answered: bool = True) -> None:
        """``answered``: nvidia-smi said something (readings, or its own error); a tool that did not
        answer (hung, killed at its limit) is no GPU heartbeat: the GPU values stay as old as they are,
        and the station turns stale with that source named instead of "live" on old data."""
        self.post(GpuSample(self.station.name, gpus, time.time(), error))
        self._gpu_failing = error is not None and not gpus
        self._heard(gpu=answered)
        # the process list (and GB10's memory) come from the compute-apps stream; no line at all
        # means no compute process: forget apps not seen lately
        horizon = time.monotonic() - 2.5 * self.gpu_interval_ms / 1000
        stale = [pid for pid, (_, seen) in self._apps.items() if seen < horizon]
        for pid in stale:
            del self._apps[pid]
        self.post(AppsSample(self.station.name, [a for a, _ in self._apps.values()], time.time()))

    async def _station_stream(self) -> None:
        """The station loop's lines (``cmdlines.station_stream``): ``A`` a process, ``E`` a container
        event, ``M`` host memory (a block ends with ``M @@``: the connection's heartbeat between GPU
        rounds). A tool that ended (``@@end``) is asked again with the channel, after a while."""
        block: list[str] = []
        ended: float | None = None
        cmd = cmdlines.station_stream(self.station.container, self.gpu_interval_ms, HOSTMEM_EVERY_S)
        async for line in self.transport.stream(cmd):
            tag, _, text = line.rstrip("\r\n").partition(" ")
            if text.strip() == STREAM_ENDED:
                ended = ended or time.monotonic()
            elif tag == "A":
                with contextlib.suppress(ParseError):
                    for app in smi.parse_compute_apps(text):
                        self._apps[app.pid] = (app, time.monotonic())
            elif tag == "E":
                if docker_probe.parse_event(text):
                    await self._refresh_container()
            elif tag == "M" and text.strip() != "@@":
                block.append(text)
            elif tag == "M":
                if not self.station.local:  # (the console's own station: psutil says it)
                    with contextlib.suppress(ParseError):
                        self.post(HostMemSample(self.station.name, parse_meminfo("\n".join(block)), time.time()))
                        self._heard()
                block = []
                if ended is not None and time.monotonic() - ended >= TOOL_RETRY_S:
                    return  # ask the ended tool again: the channel starts again at once

    async def _meminfo_stream(self) -> None:
        """The console's own station: host memory from psutil, no process at all."""
        while True:
            vm = psutil.virtual_memory()
            mem = HostMemory(vm.total // 2**20, vm.available // 2**20, getattr(vm, "cached", 0) // 2**20 or None)
            self.post(HostMemSample(self.station.name, mem, time.time()))
            self._heard()
            await asyncio.sleep(HOSTMEM_EVERY_S)

    # ------------------------------------------------------------------ logs (the owner's side)

    def _logs_flushed(self, batches: list[LogBatch]) -> None:
        """The stream's batches, classified once: the tracker reads the classification here, the
        diagnosis and the log view from the ``LogBatch`` messages that carry it."""
        changed = False
        for batch in batches:
            changed |= self.tracker.feed_stamped(batch.classified, batch.stamps)  # type: ignore[arg-type]
        if changed:
            self.post(EngineUpdate(self.station.name, _copy(self.tracker.progress)))
        for batch in batches:
            self.post(batch)

    def _engine_stopped(self, info: docker_probe.ContainerInfo) -> None:
        """The container stopped: the engine did too (a failure stays a failure)."""
        if self.tracker.progress.phase not in ENDED_PHASES:
            self.tracker.progress.phase = EnginePhase.STOPPED
        self.post(EngineUpdate(self.station.name, _copy(self.tracker.progress)))


def _copy(p):
    return replace(p, notes=list(p.notes))
