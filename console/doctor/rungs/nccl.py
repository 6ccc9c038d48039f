"""Rung 3, NCCL across the stations: nccl-tests ``all_reduce_perf -b 8 -e 1G -f 2 -g 1``, one rank per
station, launched from the head with ``mpirun`` over SSH as NVIDIA's NCCL playbook does, each rank
with its own station's launch environment (the container's ``NCCL_*``/``GLOO_*``/... variables, or the
console's launch command when there is no container) plus ``NCCL_DEBUG=INFO`` and
``NCCL_DEBUG_SUBSYS=INIT,NET,ENV``.

The bus-bandwidth table is judged against the profile's expected figure (the largest message's
busbw: small messages are latency-bound and drag the printed average down); the NCCL lines say which
network was chosen, GPUDirect per HCA, the GID index each rank read and the interfaces. No result
within the timeout is a finding of its own (a hang), reported with the last NCCL lines; the mpirun
process tree is always ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

from console.doctor import buffers, facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.durations import elapsed
from console.probes import ParseError
from console.probes.nccl_tests import NcclInfo, NcclTestResult, parse_nccl_info, parse_nccl_tests
from console.remote import cmdlines as rc
from console.remote.transport import ChannelRefused, TransportError
from console.station.checks import StationDown, ToolMissing
from console.tasks import cancel_and_wait
from console.vocabulary import CheckStatus, NcclTransport

ID = "nccl"
TEST_ARGS = ["-b", "8", "-e", "1G", "-f", "2", "-g", "1"]
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}
BUILD_NEXT = ("Build nccl-tests with MPI on every station as NVIDIA's NCCL playbook does: `sudo apt-get install -y "
              "libopenmpi-dev openmpi-bin; git clone https://github.com/NVIDIA/nccl-tests.git ~/nccl-tests; "
              "cd ~/nccl-tests && make MPI=1` (the doctor looks for all_reduce_perf on PATH, then in "
              "~/nccl-tests/build).")
HANG_NEXT = ("A hang after init: compare the MTU at both ends and the RoCE GID index each rank uses (rung env), the "
             "port counters (rung hang); prove the socket path with the debug relaunch (NCCL_IB_DISABLE=1).")


async def _stream(ctx: DoctorContext, station: str, cmd: str, timeout: float) -> tuple[list[str], bool, int | None]:
    """(lines, finished, pid): follow the command; past ``timeout`` (or when the caller is cancelled)
    close it, wait for that, and kill its process group."""
    transport = ctx.transports[station]
    lines: list[str] = []
    pid: int | None = None

    async def drain() -> None:
        nonlocal pid
        agen = transport.stream(cmd)
        try:
            async for line in agen:
                if pid is None and line.startswith("PID ") and line[4:].strip().isdigit():
                    pid = int(line[4:].strip())
                    continue
                lines.append(line)
                if len(lines) % 20 == 0:
                    ctx.progress(ID, f"{len(lines)} lines, last: {line[:100]}")
        finally:
            with contextlib.suppress(Exception):
                await agen.aclose()

    task = asyncio.ensure_future(drain())
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
        finished = bool(done)
    finally:
        try:
            await cancel_and_wait([task])  # (ended already: nothing to do)
        finally:
            if pid is not None:  # mpirun and its ranks: the channel close hangs up the session; make sure
                with contextlib.suppress(TransportError, TimeoutError):
                    await asyncio.wait_for(transport.run(rc.kill_pid(pid), timeout=10), 12)
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
    return lines, finished, pid


def per_host(lines: list[str]) -> dict[str, NcclInfo]:
    groups: dict[str, list[str]] = {}
    for ln in lines:
        m = re.match(r"^\s*(?:\[[\d,]+\]<\w+>:\s*)?([\w.\-]+):\d+:\d+ \[\d+\]", ln)
        if m:
            groups.setdefault(m.group(1), []).append(ln)
    return {h: parse_nccl_info(v) for h, v in groups.items()}


def describe(info: NcclInfo, hosts: dict[str, NcclInfo]) -> str:
    parts = [f"network {info.network or 'not chosen'}", f"transport {info.transport}"]
    if info.version:
        parts.append(f"NCCL {info.version}")
    for host, hi in hosts.items():
        gdr = "GDR on" if hi.gdr_enabled else ("GDR off" if hi.gdr_enabled is False else "GDR ?")
        gid = f"GID index {hi.gid_index}" if hi.gid_index is not None else "GID index auto"
        ifs = ", ".join(f"{i}:{a}" for i, a in (hi.bootstrap or hi.socket_ifaces)) or "?"
        parts.append(f"{host}: {gdr}, {gid}, bootstrap {ifs}" + (f", HCAs {' '.join(hi.ib_devices)}"
                                                                  if hi.ib_devices else ""))
    return "; ".join(parts)


def judge(result: NcclTestResult | None, info: NcclInfo, finished: bool, expected: float | None,
          gdr_expected: bool, timeout_s: float) -> tuple[str, str, str]:
    """(status, summary, next) of one nccl-tests run (pure)."""
    if not finished:
        return CheckStatus.FAIL, f"no result within {timeout_s:g} s: NCCL hangs" + (
            " after init" if info.init_complete else " during init"), HANG_NEXT
    if result is None or not result.rows:
        # the odd one out names the culprit: a local GID that is not the IPv4-mapped (RoCE v2 IPv4) kind
        comp = next((c for c in info.completion_errors if c.local_gid and not c.local_gid.startswith("::ffff:")),
                    info.completion_errors[0] if info.completion_errors else None)
        if comp is not None:
            gids = f" (local GID {comp.local_gid}, remote {comp.remote_gid})" if comp.local_gid else ""
            return CheckStatus.FAIL, f"IB completion error status={comp.status}{gids}: the ranks cannot talk RoCE", (
                "Status 12 is a retry timeout: the NICs cannot reach each other over RoCE. Check the GID index each "
                "rank uses against the RoCE v2 entry of `show_gids` (rung env), the MTU at both ends and the cabling.")
        first = (result.errors[0] if result and result.errors else None) or next(iter(info.warnings), None)
        return CheckStatus.FAIL, f"nccl-tests failed: {first or 'no result table'}", (
            "Read the NCCL WARN lines in the evidence; run the links and env rungs.")
    peak = result.peak_busbw_gbytes or 0.0
    avg = f", average {result.avg_busbw_gbytes:.2f}" if result.avg_busbw_gbytes is not None else ""
    text = f"bus bandwidth {peak:.2f} GB/s at {result.rows[-1].size >> 20} MiB{avg} over {info.network or '?'}"
    if result.wrong_rows:
        return (CheckStatus.FAIL, text + f"; {len(result.wrong_rows)} rows with wrong results",
                "A data corruption: GPU/NIC errors.")
    if info.transport == NcclTransport.SOCKET or info.network == "Socket":
        return CheckStatus.FAIL, text + ": NCCL fell back to TCP sockets", (
            "Give NCCL the RDMA devices (verbs library, /dev/infiniband, NCCL_IB_HCA) and do not set NCCL_IB_DISABLE.")
    if expected:
        exp = f"expected >= {expected:g} GB/s"
        if peak < 0.5 * expected:
            return (CheckStatus.FAIL, f"{text} ({exp})",
                    "Far below the expected figure: see the RDMA rung (stale or slow port).")
        if peak < expected:
            return (CheckStatus.WARN, f"{text} ({exp})",
                    "Below the expected figure: GDR, HCA selection, both rails in use?")
        text += f" ({exp})"
    if gdr_expected and info.gdr_enabled is False:
        return CheckStatus.WARN, text + "; GPUDirect RDMA disabled on a rank", (
            "Check NCCL_NET_GDR_LEVEL in the launch environment (rung env) and nvidia-peermem / dmabuf.")
    return CheckStatus.PASS, text, ""


async def _tools(ctx: DoctorContext, label: str) -> RungResult | tuple[str, dict, str | None]:
    """What the test needs before it can start: all_reduce_perf and mpirun on the head, each rank's launch
    environment, the head's login; a result instead when one is missing (nothing is run then)."""
    head = ctx.config.head
    try:
        binary = (await ctx.run(head.name, rc.nccl_tests_binary())).stdout.strip().splitlines()
        mpirun = await ctx.run(head.name, "command -v mpirun || true")
        envs = {s.name: await facts.launch_env(ctx, s) for s in ctx.stations}
        user = await ctx.cmd.reachable(head.name)
    except (StationDown, ToolMissing) as exc:
        return RungResult(ID, label, CheckStatus.SKIP, f"cannot run nccl-tests: {exc}")
    if not binary:
        return RungResult(ID, label, CheckStatus.FAIL, f"all_reduce_perf (nccl-tests) not found on {head.name}", (),
                          BUILD_NEXT)
    if not mpirun.stdout.strip():
        return RungResult(ID, label, CheckStatus.FAIL, f"mpirun not found on {head.name}", (), BUILD_NEXT)
    return binary[0], envs, user


def _ranks(stations, envs: dict) -> list[tuple[str, dict[str, str]]]:
    """Each rank's address and NCCL environment: the launch's NCCL_* variables, with the debug output on."""
    ranks = []
    for s in stations:
        env = {k: v for k, v in envs[s.name][0].items() if k.startswith("NCCL_")}
        env.update(DEBUG_ENV)
        ranks.append((s.rail_ip or s.host, env))
    return ranks


def _evidence(head: str, cmd: str, took: float, sources: str, cap_why: str | None, info, hosts,
              lines: list[str]) -> list[str]:
    """The command as run, what NCCL chose, its last lines and the test's table."""
    evidence = [f"[{head}] $ {cmd}\n(ran {elapsed(took)}; each rank's NCCL environment from {sources})"
                + (f"\n({cap_why})" if cap_why else ""),
                "NCCL chose: " + describe(info, hosts)]
    nccl_tail = [ln for ln in lines if "NCCL" in ln][-14:]
    table = [ln for ln in lines if not ("NCCL" in ln and ":" in ln.split(" ", 1)[0])]
    evidence.append("Last NCCL lines:\n" + "\n".join(nccl_tail) if nccl_tail else "no NCCL line was printed")
    evidence.append("Output:\n" + "\n".join(table[-40:]))
    return evidence


async def run(ctx: DoctorContext) -> list[RungResult]:
    stations = ctx.stations
    label = ",".join(s.name for s in stations)
    if len(stations) < 2:
        return [RungResult(ID, label, CheckStatus.SKIP, "one station: NCCL across stations does not apply")]
    head = ctx.config.head
    tools = await _tools(ctx, label)
    if isinstance(tools, RungResult):
        return [tools]
    binary, envs, user = tools
    unified = ctx.profile.gpu.unified_memory  # the test's buffers are host memory there: sized by MemAvailable
    avail = await buffers.read_available(lambda n, c: ctx.run(n, c, tag="buffers"), ctx.config) if unified else {}
    cap = buffers.nccl_cap(avail, ctx.config.ui.memory_floor_mib, unified)
    if cap.max_bytes is None:
        return [RungResult(ID, label, CheckStatus.SKIP, f"nccl-tests {cap.why}", (),
                           "Free host memory on that station (stop the engine, drop the page cache), then rerun.")]
    args = TEST_ARGS if cap.max_bytes == buffers.FULL_MAX_BYTES else \
        [a if TEST_ARGS[i - 1:i] != ["-e"] else cap.arg for i, a in enumerate(TEST_ARGS)]
    cmd = rc.nccl_tests_mpirun(_ranks(stations, envs), binary, args, allow_root=user == "root")
    ctx.progress(ID, f"all_reduce_perf across {label} (up to {ctx.options.nccl_timeout_s:g} s)")
    t0 = time.monotonic()
    try:
        lines, finished, _pid = await _stream(ctx, head.name, cmd, ctx.options.nccl_timeout_s)
    except ChannelRefused as exc:  # the console's channels, not NCCL: nothing was measured
        return [RungResult(ID, label, CheckStatus.SKIP, f"nccl-tests not measured: {exc}", (),
                           "Rerun this rung when the other jobs on the station (a validation run) have ended.")]
    except TransportError as exc:
        return [RungResult(ID, label, CheckStatus.FAIL, f"mpirun could not run on {head.name}: {exc}")]
    took = time.monotonic() - t0
    try:
        result = parse_nccl_tests("\n".join(lines))
    except ParseError:
        result = None
    info = parse_nccl_info(lines)
    status, summary, nxt = judge(result, info, finished, ctx.profile.link.nccl_busbw_gbytes,
                                 ctx.profile.link.gpudirect, ctx.options.nccl_timeout_s)
    sources = "; ".join(f"{s.name}: {envs[s.name][1]}" for s in stations)
    evidence = _evidence(head.name, cmd, took, sources, cap.why, info, per_host(lines), lines)
    return [RungResult(ID, label, status, summary, tuple(evidence), nxt)]  # type: ignore[arg-type]
