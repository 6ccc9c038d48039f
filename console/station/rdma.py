"""RDMA validation: perftest ``ib_write_bw`` between the rails, the way the Station playbook's
validation script does it, with the result judged against the line rate and the profile's figure.

Per rail (both where the profile has two): the port state on both ends first; then a server on the
worker, readiness read from its own output, the client on the head, the result table parsed; host
memory always, GPU memory (``--use_cuda``/``--use_cuda_dmabuf``) where the profile expects
GPUDirect. The server process is always cleaned up — also on failure, timeout or cancel — by
closing its channel and killing the pid it printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from console import json_out
from console.config import Config, Station
from console.probes import ParseError, iproute
from console.probes import perftest as pt
from console.probes import rdma as rdma_probe
from console.probes.meminfo import parse_meminfo
from console.remote import channels
from console.remote import cmdlines as rc
from console.remote.channels import ChannelWait
from console.remote.session import make_transport
from console.remote.transport import ChannelRefused, Transport, TransportError
from console.tasks import cancel_and_wait, gather_owned
from console.vocabulary import CheckStatus

READY_TIMEOUT_S = 20.0
RUN_TIMEOUT_S = 60.0
PASS_FRACTION = 0.9  # of the low end of the profile's expected range
WARN_FRACTION = 0.6

EventFn = Callable[[str, dict], None]

_FIX = {
    "rdma-port-down": "Bring the RDMA port up on both ends (`rdma link show`, `ibv_devinfo -d DEV`); check the "
                      "cable and `ethtool NETDEV` first.",
    "rdma-connect": "The client could not reach the server's TCP port (18515): check the rail IP, `ip route get "
                    "PEER`, and any firewall on the rail interface.",
    "rdma-qp": "The queue pair could not reach RTR: wrong RoCE GID index (`show_gids`, use the v2 index of the "
               "rail IP with -x / NCCL_IB_GID_INDEX), different MTUs on the two ends, or a port down.",
    "rdma-mr": "GPU memory could not be registered for RDMA (MR error 524 = not supported): load nvidia-peermem "
               "or use a dmabuf-capable driver/kernel; on GB10 GPUDirect RDMA is not available.",
    "rdma-bandwidth": "Bandwidth below the expected figure: check `ethtool NETDEV` speed on both ends, the "
                      "cable/port pairing, the MTU (9000 on Stations) and PCIe relaxed ordering; rerun.",
    "rdma-device": "The RDMA device named in the config does not exist: compare with `ibdev2netdev`.",
    "rdma-no-device": "perftest found no RDMA device at all on the station: is the RDMA driver up (`ibv_devices`, "
                      "`rdma link show`, `lsmod | grep mlx5_ib`)? Not a network or firewall problem.",
    "rdma-mtu": "The RoCE path MTU is below what the rails allow: an end's rail has a smaller MTU. Set the same MTU "
                "on both ends (`ip link set dev NETDEV mtu 9000`, persistent in netplan) and rerun.",
    "rdma-timeout": "perftest did not finish in time: the server never saw the client (firewall, wrong IP) or "
                    "the link stalled.",
    "ssh-channels": "Not measured: the console had no SSH channel free on the station (its own budget, or the "
                    "station's sshd MaxSessions), so nothing about the rails is known. Rerun when the other jobs "
                    "(another workbench or validation run) have ended.",
    "memory-floor": "Not run: on unified memory (GB10) perftest's buffers and its CUDA context are host memory, "
                    "and a station under the floor can lock up until a power cycle. Free host memory (stop the "
                    "engine, drop the page cache) or lower [ui] memory_floor_mib, then rerun.",
}
SHORTAGE_ID = "ssh-channels"  # a run not measured for want of an SSH channel: never a network verdict
FLOOR_ID = "memory-floor"  # a run not started: a unified-memory station had no room over the floor
NOT_PROVED = frozenset({SHORTAGE_ID, FLOOR_ID})  # runs that say nothing about the rails
#: What one ib_write_bw side may take on unified memory: its buffers (tx depth x message size, a few
#: MiB) and, with --use_cuda, a CUDA context (~0.5 GiB); rounded up.
PERFTEST_MIB = 1024


@dataclass
class RdmaRun:
    rail: str  # RDMA device
    memory: str  # host | gpu
    server: str
    client: str
    status: CheckStatus = CheckStatus.SKIP
    id: str = "rdma-bandwidth"
    summary: str = ""
    gbps_avg: float | None = None
    gbps_peak: float | None = None
    line_gbps: float = 0.0
    expected_gbps: tuple[float, float] = (0.0, 0.0)
    evidence: str = ""
    fix: str = ""
    server_pid: int | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        d["expected_gbps"] = list(self.expected_gbps)
        return d


def judge(run: RdmaRun, result: pt.PerftestResult) -> RdmaRun:
    """Status, id and summary from a parsed client result (pure; tested on real outputs)."""
    lo, hi = run.expected_gbps
    where = f"{run.rail} {run.memory} memory {run.client}->{run.server}"
    if result.error:
        run.id = {"connect": "rdma-connect", "qp-rtr": "rdma-qp", "qp-rts": "rdma-qp", "mr": "rdma-mr",
                  "cuda": "rdma-mr", "device": "rdma-device", "port-in-use": "rdma-connect",
                  "no-device": "rdma-no-device"}.get(result.error, "rdma-bandwidth")
        said = f"no RDMA device (ib_write_bw: {result.error_line})" if result.error == "no-device" else result.error_line
        run.status, run.summary, run.fix = CheckStatus.FAIL, f"{where}: {said}", _FIX[run.id]
        return run
    avg = result.bw_avg_gbps or 0.0
    run.gbps_avg, run.gbps_peak = avg, result.bw_peak_gbps
    pct = f"{100 * avg / run.line_gbps:.0f}% of the {run.line_gbps:g} Gb/s line rate" if run.line_gbps else ""
    exp = f"expected {lo:g}-{hi:g} Gb/s" if hi else "no expected figure"
    run.summary = f"{where}: {avg:.2f} Gb/s ({pct}; {exp})"
    run.id = "rdma-bandwidth"
    if not lo or avg >= PASS_FRACTION * lo:
        run.status = CheckStatus.PASS
    elif avg >= WARN_FRACTION * lo:
        run.status, run.fix = CheckStatus.WARN, _FIX["rdma-bandwidth"]
    else:
        run.status, run.fix = CheckStatus.FAIL, _FIX["rdma-bandwidth"]
    return run


def gpu_index(text: str, gpu_name: str) -> int | None:
    """The CUDA index of the GPU named ``gpu_name`` in ``nvidia-smi --query-gpu=index,name`` output
    (the rail's GPU for ``--use_cuda``; a display GPU may come first)."""
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].strip() == gpu_name and row[0].strip().isdigit():
            return int(row[0])
    return None


class _Server:
    """The perftest server on one station: its output, readiness and a guaranteed cleanup."""

    def __init__(self, transport: Transport, cmd: str):
        self.transport, self.cmd = transport, cmd
        self.lines: list[str] = []
        self.pid: int | None = None
        self.ready = asyncio.Event()
        self.ended = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.error: str | None = None
        self.refused: ChannelRefused | None = None  # no SSH channel for the server (not the network)
        self.exited = False
        self.channel_wait_s = 0.0  # time spent waiting for an SSH channel (not the server's readiness)
        self._waiting_since: float | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._drain())

    def _channel(self, wait: ChannelWait) -> None:
        if wait.state == "waiting":
            self._waiting_since = time.monotonic() - wait.waited_s
        elif self._waiting_since is not None:
            self.channel_wait_s += time.monotonic() - self._waiting_since
            self._waiting_since = None

    def waited(self) -> float:
        """Seconds spent waiting for a channel so far (the readiness clock does not run meanwhile)."""
        now = time.monotonic()
        return self.channel_wait_s + (now - self._waiting_since if self._waiting_since is not None else 0.0)

    async def _drain(self) -> None:
        with channels.on_wait(self._channel):
            await self._read()

    async def _read(self) -> None:
        agen = self.transport.stream(self.cmd)
        try:
            async for line in agen:
                if line.startswith("PID ") and self.pid is None and line[4:].strip().isdigit():
                    self.pid = int(line[4:].strip())
                    continue
                self.lines.append(line)
                if pt.is_ready(line):
                    self.ready.set()
            self.exited = True  # the remote command ended by itself (its output says why)
        except ChannelRefused as exc:
            self.error, self.refused = str(exc), exc
        except TransportError as exc:
            self.error = str(exc)
        finally:
            self.ended.set()
            with contextlib.suppress(Exception):
                await agen.aclose()

    async def wait_ready(self, timeout: float) -> bool:
        """Ready within ``timeout`` of the server's channel opening (a wait for the channel is the
        console's queue, not the server's start-up)."""
        t0 = time.monotonic()
        waiters = [asyncio.ensure_future(self.ready.wait()), asyncio.ensure_future(self.ended.wait())]
        try:
            while not (self.ready.is_set() or self.ended.is_set()):
                left = t0 + timeout + self.waited() - time.monotonic()
                if left <= 0:
                    break
                await asyncio.wait(waiters, timeout=min(left, 1.0), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waiters)
        return self.ready.is_set()

    async def cleanup(self) -> None:
        """Close the channel (sshd hangs up the process), wait for that, and kill the pid it printed."""
        if self._task is not None:
            await cancel_and_wait([self._task])  # (waited for, its error retrieved)
        if self.pid is not None:
            with contextlib.suppress(TransportError, asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(self.transport.run(rc.kill_pid(self.pid), timeout=10), 12)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


async def run_pair(config: Config, tr: dict[str, Transport], run: RdmaRun, srv_st: Station, cli_st: Station,
                   gid: dict[str, int | None], extra: dict[str, list[str]], emit: EventFn) -> RdmaRun:
    """One perftest pair (server on ``srv_st``, client on ``cli_st``); shared by validate-rdma and the
    doctor's rdma rung."""
    if config.profile.gpu.unified_memory:
        short = await _short_of_memory(tr, (srv_st, cli_st), config.ui.memory_floor_mib)
        if short:
            run.status, run.id, run.fix = CheckStatus.SKIP, FLOOR_ID, _FIX[FLOOR_ID]
            run.summary = f"{run.rail} {run.memory} memory: not run: {short}"
            return run
    scmd = rc.perftest_server(run.rail, gid[srv_st.name], extra[srv_st.name])
    ccmd = rc.perftest_client(run.rail, srv_st.rail_ip, gid[cli_st.name], extra[cli_st.name])
    server = _Server(tr[srv_st.name], scmd)
    server.start()
    try:
        emit("server-starting", {"rail": run.rail, "memory": run.memory, "station": srv_st.name})
        if not await server.wait_ready(READY_TIMEOUT_S):
            run.server_pid = server.pid
            if server.refused is not None:
                return not_measured(run, server.refused)
            err = pt.find_error(server.output)
            run.evidence = f"[{srv_st.name}] $ {scmd}\n{server.output}" + (f"\n{server.error}" if server.error else "")
            if err:
                return judge(run, pt.PerftestResult(error=err[0], error_line=err[1]))
            if server.exited:  # it exited at once: not a timeout, its output says why
                last = next((ln.strip() for ln in reversed(server.lines) if ln.strip()), "no output")
                run.status, run.id, run.fix = CheckStatus.FAIL, "rdma-bandwidth", "Read the server's output (evidence)."
                run.summary = f"{run.rail} {run.memory} memory: the server on {srv_st.name} exited at once: {last}"
                return run
            run.status, run.id, run.fix = CheckStatus.FAIL, "rdma-timeout", _FIX["rdma-timeout"]
            run.summary = f"{run.rail} {run.memory} memory: the server on {srv_st.name} never became ready"
            return run
        run.server_pid = server.pid
        emit("server-ready", {"rail": run.rail, "memory": run.memory, "station": srv_st.name, "pid": server.pid})
        res = await tr[cli_st.name].run(ccmd, timeout=RUN_TIMEOUT_S)
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(server.ended.wait(), 5)
        run.evidence = (f"[{cli_st.name}] $ {ccmd}\n{(res.stdout + res.stderr).rstrip()}\n\n"
                        f"[{srv_st.name}] $ {scmd}\n{server.output}")
        try:
            parsed = pt.parse_bw(res.stdout + res.stderr)
        except ParseError as exc:
            run.status, run.id, run.summary = CheckStatus.FAIL, "rdma-bandwidth", f"perftest output not understood: {exc}"
            return run
        judge(run, parsed)
        if not parsed.error:
            await _check_mtu(config, tr, run, parsed, (srv_st, cli_st))
        return run
    except ChannelRefused as exc:
        return not_measured(run, exc)
    except TransportError as exc:
        run.status, run.id, run.summary = CheckStatus.FAIL, "rdma-timeout", str(exc)
        run.fix = _FIX["rdma-timeout"]
        return run
    finally:
        await asyncio.shield(server.cleanup())
        emit("server-stopped", {"rail": run.rail, "memory": run.memory, "station": srv_st.name, "pid": server.pid})


def room_words(available_mib: dict[str, int | None], floor_mib: int) -> str:
    """Why perftest may not start on unified memory ('' when every station read has room): a station's
    MemAvailable less PERFTEST_MIB would fall under the floor. A station not read is no reason to
    refuse (perftest's own buffers are small); pure."""
    short = [(n, a) for n, a in available_mib.items() if a is not None and a - PERFTEST_MIB < floor_mib]
    if not short:
        return ""
    return "; ".join(f"{n}'s MemAvailable is {a / 1024:.1f} GiB, perftest needs {PERFTEST_MIB / 1024:.0f} GiB over "
                     f"the floor {floor_mib / 1024:.1f} GiB" for n, a in short) + " (unified memory: the box could lock up)"


async def _short_of_memory(tr: dict[str, Transport], stations: tuple[Station, ...], floor_mib: int) -> str:
    async def one(st: Station) -> int | None:
        try:
            res = await tr[st.name].run(rc.meminfo_once())
            return parse_meminfo(res.stdout).available_mib if res.ok else None
        except (ParseError, TransportError):  # not read: said nowhere as room, and no reason to refuse
            return None

    got = await gather_owned(*(one(st) for st in stations))
    return room_words({st.name: a for st, a in zip(stations, got, strict=True)}, floor_mib)


def not_measured(run: RdmaRun, exc: ChannelRefused) -> RdmaRun:
    """No SSH channel for a side of the pair: skipped and named a channel shortage, never a verdict
    on the rails."""
    run.status, run.id, run.fix = CheckStatus.SKIP, SHORTAGE_ID, _FIX[SHORTAGE_ID]
    run.summary = f"{run.rail} {run.memory} memory: not measured: {exc}"
    return run


async def _check_mtu(config: Config, tr: dict[str, Transport], run: RdmaRun, result: pt.PerftestResult,
                     ends: tuple[Station, Station]) -> None:
    """A RoCE path MTU below what the profile's rails allow means an end has a smaller rail MTU (the
    bandwidth may still pass): say so, with both ends' rail MTUs read now."""
    got, want = pt.active_mtu(result.header), pt.roce_mtu(config.profile.link.mtu)
    if got is None or got >= want:
        return
    mtus = []
    for st in ends:
        if not st.rail_netdev:
            continue
        try:
            res = await tr[st.name].run(rc.ip_link(st.rail_netdev))
            mtus.append(f"{st.name} {st.rail_netdev} {iproute.parse_link(res.stdout).mtu}")
        except (TransportError, ParseError):
            mtus.append(f"{st.name} {st.rail_netdev} ?")
    rails = f" (rail MTUs: {', '.join(mtus)})" if mtus else ""
    run.summary += (f"; RoCE MTU {got} B, not the {want} B that {config.profile.link.mtu}-byte rails allow: "
                    f"MTU mismatch{rails}")
    run.id, run.fix = "rdma-mtu", _FIX["rdma-mtu"]
    if run.status == CheckStatus.PASS:
        run.status = CheckStatus.WARN


async def _port_state(tr: Transport, st: Station, device: str) -> tuple[bool, str]:
    cmd = rc.ibv_devinfo(device)
    res = await tr.run(cmd)
    ev = f"[{st.name}] $ {cmd}\n{(res.stdout + res.stderr).rstrip()}"
    try:
        ports = rdma_probe.parse_ibv_devinfo(res.stdout)
    except ParseError:
        return False, ev
    return bool(ports) and ports[0].active, ev


async def gid_for(tr: Transport, st: Station, device: str) -> int | None:
    """The RoCE v2 GID index of the station's rail address on ``device`` (None when show_gids fails)."""
    res = await tr.run(rc.show_gids(device))
    try:
        gids = rdma_probe.parse_show_gids(res.stdout)
    except ParseError:
        return None
    idx = rdma_probe.roce_v2_index(gids, st.rail_ip, device)
    if idx is None:  # a second rail carries its own address: its first v2 IPv4 GID
        idx = next((g.index for g in gids if g.device == device and g.version == "v2" and g.ipv4), None)
    return idx


async def validate_rdma(config: Config, transports: dict[str, Transport] | None = None,
                        on_event: EventFn | None = None, gpu: bool | None = None) -> list[RdmaRun]:
    """Host (and GPU) memory bandwidth on each rail, both directions (head -> worker, then worker ->
    head), as the workbench's RDMA rung measures it: a one-way fault (a TX path, a port's buffers)
    shows in one direction only, and the two commands agree."""
    emit = on_event or (lambda kind, detail: None)
    if not config.workers:
        raise ValueError("validate-rdma needs two stations (one head, at least one worker)")
    own = transports is None
    tr = transports or {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                        for s in config.stations}
    head, worker = config.head, config.workers[0]
    p = config.profile
    rails = list(p.link.rails) or [head.rdma_device]
    if head.rdma_device and head.rdma_device in rails:
        rails.remove(head.rdma_device)
        rails.insert(0, head.rdma_device)
    want_gpu = p.link.gpudirect if gpu is None else gpu
    runs: list[RdmaRun] = []
    try:
        gpu_extra: dict[str, list[str]] = {}
        if want_gpu:
            for st in (head, worker):
                try:
                    res = await tr[st.name].run(rc.gpu_index_names())
                    idx = gpu_index(res.stdout, p.gpu.name)
                except TransportError:
                    idx = None
                gpu_extra[st.name] = [f"--use_cuda={idx if idx is not None else 0}", "--use_cuda_dmabuf"]
        for rail in rails:
            base = dict(rail=rail, server=worker.name, client=head.name, line_gbps=p.link.speed_mbps / 1000,
                        expected_gbps=tuple(p.link.rdma_host_gbps))
            try:
                (ok_s, ev_s), (ok_c, ev_c) = await gather_owned(_port_state(tr[worker.name], worker, rail),
                                                                  _port_state(tr[head.name], head, rail))
                if not (ok_s and ok_c):
                    down = [s.name for s, ok in ((worker, ok_s), (head, ok_c)) if not ok]
                    runs.append(RdmaRun(memory="host", status=CheckStatus.FAIL, id="rdma-port-down",
                                        summary=f"{rail}: port not active on {', '.join(down)}; perftest not run",
                                        evidence=f"{ev_c}\n\n{ev_s}", fix=_FIX["rdma-port-down"], **base))
                    emit("run-done", runs[-1].to_dict())
                    continue
                gid = {head.name: await gid_for(tr[head.name], head, rail),
                       worker.name: await gid_for(tr[worker.name], worker, rail)}
            except TransportError as exc:
                runs.append(RdmaRun(memory="host", status=CheckStatus.SKIP, id="rdma-port-down", summary=str(exc), **base))
                emit("run-done", runs[-1].to_dict())
                continue
            kinds = [("host", {head.name: [], worker.name: []})]
            if want_gpu:
                kinds.append(("gpu", gpu_extra))
            for srv, cli in ((worker, head), (head, worker)):
                for memory, extra in kinds:
                    run = RdmaRun(memory=memory, **{**base, "server": srv.name, "client": cli.name})
                    runs.append(await run_pair(config, tr, run, srv, cli, gid, extra, emit))
                    emit("run-done", runs[-1].to_dict())
        return runs
    finally:
        if own:
            await asyncio.gather(*(t.close() for t in tr.values()), return_exceptions=True)


def overall(runs: list[RdmaRun]) -> int:
    """1 when a run failed, or was not measured (no channel, no memory over the floor: nothing was proved)."""
    return 1 if not runs or any(r.status == CheckStatus.FAIL or r.id in NOT_PROVED for r in runs) else 0


def to_json(runs: list[RdmaRun]) -> str:
    return json_out.dumps({"runs": [r.to_dict() for r in runs], "result": "failed" if overall(runs) else "ok"},
                      indent=2)
