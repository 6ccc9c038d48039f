"""What NCCL RAS and PyTorch's flight recorder report on the simulated stations at a given moment,
for the hang evidence (``hang-report``): per rank, how many collectives it launched and whether the
last one completed. Pure functions of the world, the engine timelines and the clock, so the
``ncclras`` shim on any station and the dump a station's container writes agree.

The model: a rank launches its warm-up all-reduce at NCCL init, then ``OPS_PER_S`` all-reduces a
second while it serves. A hang freezes the counts where the hang began: ``nccl-timeout`` and
``init-hang`` in the first collective; ``collective-hang`` and ``wedge`` with every rank at the same
count; ``desync`` with the fault's rank one operation behind (it never launched the collective the
others wait in). A rank whose container is down is missing from the job (dead after a while).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from console.sim.engine import container_status
from console.sim.launch import IMAGE_NCCL, nccl_version, run_env
from console.sim.world import World

OPS_PER_S = 25.0  # all-reduces a second while serving (real seconds: decode steps of a TP=2 model)
BASE_COUNTS = {"Broadcast": 1, "Reduce": 0, "AllGather": 4, "ReduceScatter": 0}
WORKER_PID_OFFSET = 412  # the worker process (console.sim.workbench: HOST_PID + 412)
DEAD_AFTER_S = 5.0  # a RAS peer unreachable this long is "considered dead"
#: RAS gathers each rank's counts over the network a few ms apart: while the job runs, a read catches
#: the higher ranks this much earlier, so a healthy job's reads often differ by an operation (a
#: transient MISMATCH, as on real stations); once the counts freeze every read agrees.
COLLECT_LAG_S = 0.02


@dataclass(frozen=True)
class SimRank:
    rank: int
    station: str
    host: str
    pid: int
    up: bool
    allreduce: int  # all-reduces launched
    in_flight: bool  # the last one never completed
    down_for_s: float = 0.0
    nccl: str = IMAGE_NCCL


def faults_now(world: World) -> set[str]:
    """Every station's faults as world.json says them now (a test may switch one on while it runs)."""
    return {f for n in world.names for f in world.faults_now(n)}


def _hang_at(world: World, tl, started: float) -> float | None:
    """The absolute time this rank's collectives stopped (None: they still run)."""
    faults = faults_now(world)
    for t0, name in tl.phases:
        if name in ("waiting on collective", "hung in all-reduce"):
            return started + t0
    if "init-hang" in faults:
        return started
    if "wedge" in faults and tl.wedge_at is not None:  # served until the tokens stopped
        return started + tl.wedge_at
    return None


def _job_clock(world: World, now: float) -> tuple[float | None, float | None] | None:
    """(hang, ready) absolute times of the job, from the head's run (the ranks serve in lockstep)."""
    head = world.names[0]
    st = container_status(world, head, world.state(head), "glm53", now)
    tl = st.get("timeline")
    if tl is None or "started_at" not in st:
        return None
    started = float(st["started_at"])
    return _hang_at(world, tl, started), (started + tl.ready_at if tl.ready_at is not None else None)


def rank_state(world: World, name: str, now: float | None = None) -> SimRank:
    now = time.time() if now is None else now
    state = world.state(name)
    rank = int(state["rank"])
    st = container_status(world, name, state, "glm53", now)
    host = state["rail"]["ip"]
    from console.sim.workbench import HOST_PID

    pid = HOST_PID + WORKER_PID_OFFSET
    if st["state"] != "running":
        fin = st.get("finished_at")
        return SimRank(rank, name, host, pid, False, 0, False, now - float(fin) if fin else 1e9)
    started = float(st["started_at"])
    tl = st["timeline"]
    env = run_env(st["run"].get("args"))
    init = next((t0 for t0, ph in tl.phases if ph in ("waiting on collective", "loading weights")), None)
    if init is None or now < started + init:
        return SimRank(rank, name, host, pid, True, 0, False, nccl=nccl_version(env))
    hang, ready = _job_clock(world, now) or (_hang_at(world, tl, started),
                                             started + tl.ready_at if tl.ready_at is not None else None)
    upto = min(now - COLLECT_LAG_S * rank, now if hang is None else hang)
    ops = 1 + (int(OPS_PER_S * (upto - ready)) if ready is not None and upto > ready else 0)
    frozen = hang is not None and now >= hang
    desync = "desync" in world.faults_now(name)
    if frozen and desync:
        ops -= 1  # this rank never launched the collective the others wait in
    return SimRank(rank, name, host, pid, True, ops, frozen and not desync,
                   nccl=nccl_version(env))


def job(world: World, now: float | None = None) -> list[SimRank]:
    now = time.time() if now is None else now
    return [rank_state(world, n, now) for n in world.names]


def reachable(world: World, name: str, now: float | None = None) -> str | None:
    """Why no RAS service answers on ``name`` (None: it does)."""
    me = rank_state(world, name, now)
    if not me.up:
        return "down"
    st = world.state(name)["containers"].get("glm53") or {}
    env = run_env((st.get("runs") or [{}])[-1].get("args"))
    if env.get("NCCL_RAS_ENABLE") == "0":
        return "disabled"
    if me.allreduce == 0 and not me.in_flight:
        return "not initialised"
    return None


def counts(r: SimRank) -> dict[str, int]:
    base = BASE_COUNTS if r.allreduce > 1 else dict.fromkeys(BASE_COUNTS, 0)  # at init: the warm-up all-reduce only
    return {**base, "AllReduce": r.allreduce}


def flight_recorder(world: World, name: str, now: float | None = None) -> dict | None:
    """The dump this station's rank writes when asked (the dict torch pickles; None: no NCCL yet)."""
    t = time.time() if now is None else now
    r = rank_state(world, name, t)
    if not r.up or r.allreduce == 0:
        return None
    last = r.allreduce  # the last collective it launched (in flight when the rank hangs in it)
    entries = []
    for seq in range(max(1, last - 9), last + 1):
        done = not (seq == last and r.in_flight)
        entries.append({
            "record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"), "thread_name": "pt_main_thread",
            "thread_id": "140121392744000", "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": "nccl:all_reduce", "time_created_ns": int(t * 1e9) - (last - seq) * 40_000_000,
            "input_sizes": [[8, 6144]], "input_dtypes": ["BFloat16"], "output_sizes": [[8, 6144]],
            "output_dtypes": ["BFloat16"], "state": "completed" if done else "started",
            "time_discovered_started_ns": 1, "time_discovered_completed_ns": 2 if done else None,
            "retired": done, "timeout_ms": 600000, "is_p2p": False, "frames": []})
    completed = last if not r.in_flight else last - 1
    return {"version": "2.7", "comm_lib_version": r.nccl,
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(len(world.names))))}},
            "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": last,
                                "last_completed_collective": completed}},
            "entries": entries}


# ------------------------------------------------------------------ ncclras output (NCCL's formats)


def _json(world: World, ranks: list[SimRank], now: float, version: str) -> str:
    up = [r for r in ranks if r.up]
    miss = [r for r in ranks if not r.up]
    out = ["{", f'  "nccl_version": "{version}",', '  "cuda_runtime_version": 13000,',
           '  "cuda_driver_version": 13000,',
           f'  "timestamp": "{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}",',
           '  "communicators_count": 1,', '  "communicators": [', "    {",
           '      "hash": "0x8f3e21c4d7a9b001",', '      "secondary_hash": "0x5c2a17e9b3d04f61:0x1e6f3b2a09c4d857",',
           f'      "size": {len(ranks)},', f'      "ranks_count": {len(up)},', f'      "missing_ranks_count": {len(miss)},',
           '      "ranks": [']
    blocks = []
    for r in up:
        c = counts(r)
        blocks.append("\n".join([
            "        {", f'          "rank": {r.rank},', f'          "host": "{r.host}",', f'          "pid": {r.pid},',
            '          "cuda_dev": 0,', '          "nvml_dev": 0,', '          "status": {',
            '            "init_state": 0,', '            "async_error": 0,', '            "finalize_called": false,',
            '            "destroy_flag": false,', '            "abort_flag": false', "          },",
            '          "collective_counts": {',
            ",\n".join(f'            "{k}": {c[k]}' for k in ("Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                                           "AllReduce")),
            "          }", "        }"]))
    text = "\n".join(out) + "\n" + ",\n".join(blocks)
    if miss:
        mb = []
        for r in miss:
            mb.append("\n".join([
                "        {", f'          "rank": {r.rank},', f'          "host": "{r.host}",', f'          "pid": {r.pid},',
                '          "cuda_dev": 0,', '          "nvml_dev": 0,', '          "status": {',
                '            "unresponsive": true,',
                f'            "considered_dead": {"true" if r.down_for_s >= DEAD_AFTER_S else "false"}',
                "          }", "        }"]))
        text += '\n      ],\n      "missing_ranks": [\n' + ",\n".join(mb)
    text += '\n      ]\n    }\n  ],\n  "ras": {\n    "collection_time_sec": 0.004,\n    "timeouts_count": 0\n  }\n}\n'
    return text


def _text(world: World, ranks: list[SimRank], version: str) -> str:
    n = len(ranks)
    up = [r for r in ranks if r.up]
    miss = [r for r in ranks if not r.up]
    dead = [r for r in miss if r.down_for_s >= DEAD_AFTER_S]
    values = {r.allreduce for r in up}
    errors = ",".join(e for e, on in (("INCOMPLETE", bool(miss)), ("MISMATCH", len(values) > 1)) if on) or "OK"
    lines = [f"NCCL version {version}+cuda13.0 compiled with CUDA 13.0", "CUDA runtime version 13000, driver version 13000",
             "", "Job summary", "===========", "",
             "  Nodes  Processes         GPUs  Processes     GPUs",
             "(total)   per node  per process    (total)  (total)",
             f"{n:7d}  {1:9d}  {1:11d}  {n:9d}  {n:7d}", "", "Communicators... (0.004s)", "=============", "",
             "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
             "    #  in group  per comm  per node  per comm  in group",
             f"{0:5d}  {1:8d}  {n:8d}  {'1':>8s}  {n:8d}  {n:8d}  {'RUNNING':>8s}  {errors:>6s}", "",
             "Errors", "======", ""]
    if dead:
        lines += ["DEAD", f"  {len(dead)} job process{'es are' if len(dead) > 1 else ' is'} considered dead "
                  "(unreachable via the RAS network)"]
        lines += [f"  Process {r.pid} on node {r.host} managing GPU 0" for r in dead] + [""]
    if miss:
        lines += ["#0-0 (8f3e21c4d7a9b001) INCOMPLETE",
                  f"  Missing communicator data from {len(miss)} rank{'s' if len(miss) > 1 else ''}"]
        lines += [f"  Rank {r.rank} -- GPU 0 managed by process {r.pid} on node {r.host}" for r in miss] + [""]
    lines += ["Warnings", "========", ""]
    if len(values) > 1:
        lines += ["#0-0 (8f3e21c4d7a9b001) MISMATCH", "  Communicator ranks have different AllReduce operation counts"]
        groups: dict[int, list[SimRank]] = {}
        for r in up:
            groups.setdefault(r.allreduce, []).append(r)
        for v, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), -kv[0])):
            if len(rs) > 1:
                lines.append(f"  {len(rs)} ranks have launched up to operation {v}")
            for r in rs:
                if len(rs) > 1:
                    lines.append(f"  Rank {r.rank} -- GPU 0 managed by process {r.pid} on node {r.host}")
                else:
                    lines.append(f"  Rank {r.rank} has launched up to operation {v} -- GPU 0 managed by process "
                                 f"{r.pid} on node {r.host}")
        lines.append("")
    return "\n".join(lines) + "\n"


def ncclras_output(world: World, name: str, fmt: str = "text", now: float | None = None) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of ``ncclras [-f FMT]`` run on station ``name`` now."""
    now = time.time() if now is None else now
    why = reachable(world, name, now)
    if why is not None:
        return ("", "Connecting to 127.0.0.1:28028: Connection refused\nFailed to connect to the NCCL RAS service!\n"
                "Please make sure that the NCCL job has the RAS service enabled and that\n"
                "the RAS client was started on a node where the NCCL job is running.\n", 1)
    ranks = job(world, now)
    version = rank_state(world, name, now).nccl
    if fmt == "json":
        if tuple(int(x) for x in version.split(".")) < (2, 28, 7):
            return "", "ncclras: invalid option -- 'f'\n", 1
        return _json(world, ranks, now, version), "", 0
    return _text(world, ranks, version), "", 0
