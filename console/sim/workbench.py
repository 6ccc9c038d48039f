"""What the simulated stations know for the NCCL workbench (``dgx-console doctor``): GID tables, the
launch command the operator's script ran, the NCCL environment of a run and what NCCL makes of it,
the management network, and how counters, stacks and kernel lines look at a given moment.

Pure functions of the world state, a run's ``docker run`` arguments and the clock, so the shims
(``show_gids``, ``mpirun``, ``py-spy``, ``journalctl``, ``rdma statistic``, ...) and the engine
timelines agree without talking to each other. The faults are listed in ``console.sim.world``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from console.sim.world import World

MGMT_NETDEV = "eno1"
MGMT_NET = "198.19.0."  # the stations' management LAN in the simulator (RFC 2544 range, never routed)
PINNED_GID_INDEX = 3  # what NVIDIA's playbooks and most launch scripts pin
SHIFTED_GID_INDEX = 5  # gid-mismatch: a global IPv6 address takes 2/3, the rail IPv4 moves to 4/5
HOST_NCCL_SO = "/usr/lib/aarch64-linux-gnu/libnccl.so.2"
IMAGE_NCCL, HOST_NCCL = "2.30.7", "2.27.3"


def faults(world: World, name: str) -> list[str]:
    return world.faults(name)


def all_faults(world: World) -> set[str]:
    return {f for n in world.names for f in world.faults(n)}


def mgmt_ip(world: World, name: str) -> str:
    return f"{MGMT_NET}{world.names.index(name) + 1}"


# ------------------------------------------------------------------ GIDs


@dataclass(frozen=True)
class GidRow:
    index: int
    gid: str
    ipv4: str
    version: str


def _ipv4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def _link_local(station: str, netdev: str) -> str:
    h = hashlib.sha1(f"{station}/{netdev}".encode()).hexdigest()
    return f"fe80:0000:0000:0000:5aa2:e1ff:fe{h[0:2]}:{h[2:6]}"


def gid_rows(world: World, name: str, device: str, netdev: str, ip: str, primary: bool) -> list[GidRow]:
    """The port's GID table as ``show_gids`` prints it: link-local v1/v2 at 0/1, then the addresses."""
    ll = _link_local(name, netdev)
    rows = [GidRow(0, ll, "", "v1"), GidRow(1, ll, "", "v2")]
    if primary and "gid-mismatch" in world.faults(name):
        g6 = f"fd00:0000:0000:0000:0000:0000:0000:{world.names.index(name) + 1:04x}"
        rows += [GidRow(2, g6, "", "v1"), GidRow(3, g6, "", "v2")]
    base = rows[-1].index + 1
    return rows + [GidRow(base, _ipv4_gid(ip), ip, "v1"), GidRow(base + 1, _ipv4_gid(ip), ip, "v2")]


def roce_v2_index(world: World, name: str) -> int:
    """The RoCE v2 GID index of the station's rail IPv4 address (its primary rail)."""
    return SHIFTED_GID_INDEX if "gid-mismatch" in world.faults(name) else PINNED_GID_INDEX


# ------------------------------------------------------------------ a run's NCCL environment


def run_env(args: list[str] | None) -> dict[str, str]:
    """The ``-e K=V`` / ``--env K=V`` pairs of a docker run argv (``-e K`` copies a client variable: a
    secret's name, its value is not the simulator's to know)."""
    env: dict[str, str] = {}
    a = list(args or [])
    for i, x in enumerate(a):
        val = None
        if x in ("-e", "--env") and i + 1 < len(a):
            val = a[i + 1]
        elif x.startswith("--env="):
            val = x.split("=", 1)[1]
        if val is None:
            continue
        k, sep, v = val.partition("=")
        if sep:
            env[k] = v
    return env


def gid_ok(world: World, name: str, env: dict[str, str]) -> bool:
    """Does the GID index this run uses reach the peer? Unset / -1: NCCL picks the RoCE v2 IPv4 GID."""
    pinned = env.get("NCCL_IB_GID_INDEX")
    if pinned in (None, "", "-1"):
        return True
    try:
        return int(pinned) == roce_v2_index(world, name)
    except ValueError:
        return False


def nccl_version(env: dict[str, str]) -> str:
    return HOST_NCCL if env.get("VLLM_NCCL_SO_PATH") == HOST_NCCL_SO else IMAGE_NCCL


def gdr_enabled(world: World, env: dict[str, str]) -> bool:
    return world.profile.link.gpudirect and env.get("NCCL_NET_GDR_LEVEL", "").upper() not in ("LOC", "0")


def sockets_forced(world: World, name: str, env: dict[str, str]) -> bool:
    return "socket-fallback" in world.faults(name) or env.get("NCCL_IB_DISABLE") == "1"


def env_lines(env: dict[str, str]) -> list[str]:
    """The ``NCCL_X set by environment to V.`` lines NCCL prints for what it reads (ENV subsystem)."""
    return [f"{k} set by environment to {v}." for k, v in sorted(env.items())
            if k.startswith("NCCL_") and k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")]


def latest_args(world: World, name: str, container: str = "glm53") -> list[str] | None:
    st = world.state(name)
    c = st["containers"].get(container)
    if not c or not c["runs"]:
        return None
    return list(c["runs"][-1].get("args") or [])


# ------------------------------------------------------------------ the launch command


def world_config(world: World):
    """The config the simulated operator launched with (same fields as the sim's written config)."""
    import tomli_w

    from console.config import parse_config

    lines = [f'profile = "{world.meta["profile"]}"', "simulated = true", ""]
    ov = {**world.operator_overrides, **sim_overrides(world)}
    if ov:
        lines.append(tomli_w.dumps({"overrides": ov}))
    for rank, name in enumerate(world.names):
        r = world.state(name)["rail"]
        lines += ["[[stations]]", f'name = "{name}"', 'host = "127.0.0.1"', f"rank = {rank}",
                  f'rail_netdev = "{r["netdev"]}"', f'rdma_device = "{r["rdma"]}"', f'rail_ip = "{r["ip"]}"', ""]
    return parse_config("\n".join(lines))


def sim_overrides(world: World) -> dict[str, Any]:
    """Config overrides the faults stand for (gid-mismatch: the operator pinned the playbook's index)."""
    return {"nccl_ib_gid_index": PINNED_GID_INDEX} if "gid-mismatch" in all_faults(world) else {}


def launch_args(world: World, name: str) -> list[str]:
    """``docker run`` arguments (after ``run``) the operator's launch script used on ``name``."""
    from console.service import engines

    try:
        cfg = world_config(world)
        st = cfg.station(name)
        gpus = tuple(g["uuid"] for g in world.state(name)["gpus"] if g["serving"])
        spec = engines.build_launch(cfg, st, engines.StationRuntime(gpus, world.profile.image))
    except Exception:  # noqa: BLE001 - an unbuildable profile starts with no command line, as before
        return []
    args = list(spec.argv[2:])
    mine = world.faults(name)
    if "mgmt-master" in all_faults(world) and "--master-addr" in args:
        args[args.index("--master-addr") + 1] = mgmt_ip(world, world.names[0])
    extra: list[str] = []
    if "nccl-env-diff" in mine:
        extra += ["-e", "NCCL_NET_GDR_LEVEL=LOC", "-e", "NCCL_IB_TC=106"]
    if "nccl-version-diff" in mine:
        extra += ["-e", f"VLLM_NCCL_SO_PATH={HOST_NCCL_SO}", "-v", f"{HOST_NCCL_SO}:{HOST_NCCL_SO}:ro"]
    if extra:
        at = args.index("--entrypoint") if "--entrypoint" in args else args.index(spec.image)
        args[at:at] = extra
    return args


def transport_ok(world: World, name: str, run: dict[str, Any], peer_runs: list[tuple[str, dict]] | None = None) -> bool:
    """Can this run's first collective complete? Every rank's GID index must be its RoCE v2 one; the
    head passes its peers' runs, a worker looks at the head's latest run."""
    if not gid_ok(world, name, run_env(run.get("args"))):
        return False
    if peer_runs is None:
        head = world.names[0]
        if head == name:
            return True
        args = latest_args(world, head)
        return args is None or gid_ok(world, head, run_env(args))
    return all(gid_ok(world, peer, run_env(r.get("args"))) for peer, r in peer_runs)


# ------------------------------------------------------------------ live state


def phase_now(world: World, name: str, now: float | None = None) -> tuple[str, float | None]:
    """(timeline phase label, container start time) of the serving container, ("down", None) if not up."""
    from console.sim.engine import container_status

    now = time.time() if now is None else now
    st = container_status(world, name, world.state(name), "glm53", now)
    if st["state"] != "running":
        return "down", None
    started = float(st["started_at"])
    return st["timeline"].phase_at(now - started), started


HUNG_PHASES = ("waiting on collective", "hung in all-reduce")


# ------------------------------------------------------------------ processes and their stacks

HOST_PID = 2345  # docker inspect's State.Pid of a running simulated container


def engine_processes(world: World, name: str, now: float | None = None) -> list[tuple[int, str]]:
    """(host pid, command line) of the engine's processes, as ``docker top`` lists them."""
    phase, _started = phase_now(world, name, now)
    if phase == "down":
        return []
    rank = world.state(name)["rank"]
    prof = world.profile
    if prof.engine == "sglang":
        return [(HOST_PID, f"python3 -m sglang.launch_server --model-path {prof.model_dir} --tp {prof.tensor_parallel} "
                 f"--node-rank {rank}"),
                (HOST_PID + 412, f"sglang::scheduler_TP{rank}")]
    main = f"/usr/bin/python3 /usr/local/bin/vllm serve {prof.model_dir}" + (" --headless" if rank else "")
    procs = [(HOST_PID, main)]
    if rank == 0:
        procs.append((HOST_PID + 263, "VLLM::EngineCore"))
    procs.append((HOST_PID + 412, f"VLLM::Worker_TP{rank}"))
    return procs


_IDLE_WORKER = ("acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:570)",
                "dequeue (vllm/distributed/device_communicators/shm_broadcast.py:640)",
                "worker_busy_loop (vllm/v1/executor/multiproc_executor.py:802)",
                "worker_main (vllm/v1/executor/multiproc_executor.py:741)")
_INIT_COLLECTIVE = ("synchronize (torch/cuda/streams.py:105)",
                    "__init__ (vllm/distributed/device_communicators/pynccl.py:130)",
                    "__init__ (vllm/distributed/device_communicators/cuda_communicator.py:59)",
                    "__init__ (vllm/distributed/parallel_state.py:297)",
                    "init_model_parallel_group (vllm/distributed/parallel_state.py:1053)",
                    "initialize_model_parallel (vllm/distributed/parallel_state.py:1311)",
                    "ensure_model_parallel_initialized (vllm/distributed/parallel_state.py:1366)",
                    "init_worker_distributed_environment (vllm/v1/worker/gpu_worker.py:701)",
                    "init_device (vllm/v1/worker/gpu_worker.py:219)",
                    "worker_main (vllm/v1/executor/multiproc_executor.py:718)")
_FORWARD_COLLECTIVE = ("all_reduce (vllm/distributed/device_communicators/pynccl.py:156)",
                       "all_reduce (vllm/distributed/device_communicators/cuda_communicator.py:88)",
                       "_all_reduce_out_place (vllm/distributed/parallel_state.py:514)",
                       "all_reduce (vllm/distributed/parallel_state.py:493)",
                       "forward (vllm/model_executor/layers/linear.py:1401)",
                       "forward (vllm/model_executor/models/glm4_moe.py:402)",
                       "execute_model (vllm/v1/worker/gpu_model_runner.py:2317)",
                       "worker_busy_loop (vllm/v1/executor/multiproc_executor.py:810)",
                       "worker_main (vllm/v1/executor/multiproc_executor.py:741)")
_ENGINE_IDLE = ("poll (zmq/sugar/poll.py:106)", "poll (zmq/sugar/socket.py:1062)",
                "recv (vllm/distributed/device_communicators/shm_broadcast.py:802)",
                "dequeue (vllm/distributed/device_communicators/shm_broadcast.py:794)",
                "get_response (vllm/v1/executor/multiproc_executor.py:387)",
                "step (vllm/v1/engine/core.py:355)", "run_engine_core (vllm/v1/engine/core.py:781)")
_API_LOOP = ("select (selectors.py:468)", "_run_once (asyncio/base_events.py:1949)",
             "run_forever (asyncio/base_events.py:641)", "run (uvloop/__init__.py:109)",
             "main (vllm/entrypoints/cli/main.py:73)", "<module> (vllm:8)")
_LOADING = ("load_weights (vllm/model_executor/models/glm4_moe.py:651)",
            "load_model (vllm/model_executor/model_loader/default_loader.py:277)",
            "load_model (vllm/v1/worker/gpu_model_runner.py:2602)",
            "worker_main (vllm/v1/executor/multiproc_executor.py:718)")


def pyspy_dump(world: World, name: str, pid: int, now: float | None = None) -> str | None:
    """What ``py-spy dump --pid PID`` prints for an engine process now (None: no such process)."""
    procs = dict(engine_processes(world, name, now))
    if pid not in procs:
        return None
    phase, _started = phase_now(world, name, now)
    cmd = procs[pid]
    worker = "Worker" in cmd or "scheduler" in cmd
    status = "idle"
    if worker:
        if phase == "waiting on collective":
            frames, status = _INIT_COLLECTIVE, "active"
        elif phase == "hung in all-reduce":
            frames, status = _FORWARD_COLLECTIVE, "active"
        elif phase in ("loading weights", "profiling / KV cache", "capturing CUDA graphs", "state / KV cache"):
            frames, status = _LOADING, "active+gil"
        else:
            frames = _IDLE_WORKER
    elif "EngineCore" in cmd:
        frames = _ENGINE_IDLE
    else:
        frames = _API_LOOP
    tid = pid if pid != HOST_PID else 1
    lines = [f"Process {pid}: {cmd}", "Python v3.12.3 (/usr/bin/python3.12)", "",
             f"Thread {tid} ({status}): \"MainThread\""] + [f"    {f}" for f in frames]
    if not worker:
        lines += ["Thread 431 (idle): \"Thread-2 (_report_usage_worker)\"", "    wait (threading.py:359)",
                  "    _bootstrap (threading.py:1032)"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ counters and the kernel log


def _hw_base(world: World, name: str, device: str, counter: str, kind: str = "hw_counters") -> int:
    """A counter file the lab (or a test) wrote under the station's sysfs tree; 0 when there is none."""
    path = world.station_dir(name) / "fs" / f"sys/class/infiniband/{device}/ports/1/{kind}/{counter}"
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def rdma_counters(world: World, name: str, device: str, now: float | None = None) -> dict[str, int]:
    """The port's hardware counters now: a base (files) plus what the current phase adds per second."""
    from console.probes.activity import RETRY_COUNTERS

    now = time.time() if now is None else now
    phase, started = phase_now(world, name, now)
    primary = device == world.state(name)["rail"]["rdma"]
    vals = {c: _hw_base(world, name, device, c) for c in ("rx_write_requests", "rx_read_requests") + RETRY_COUNTERS}
    if started is not None and primary:
        up = max(0.0, now - started)
        if phase == "waiting on collective":  # a rank's GID does not reach its peer: every send times out
            vals["local_ack_timeout_err"] += int(up * 3)
            vals["roce_adp_retrans"] += int(up * 3)
        elif "stale-rail" in all_faults(world) and phase not in HUNG_PHASES:
            vals["out_of_sequence"] += int(up * 41)
            vals["packet_seq_err"] += int(up * 7)
        if phase not in HUNG_PHASES:
            vals["rx_write_requests"] += int(up * 5200)
    return vals


def nic_rdma_bytes(world: World, name: str, netdev: str, now: float | None = None) -> dict[str, int]:
    """``tx/rx_vport_rdma_unicast_bytes`` of the rail NIC: growing while collectives flow."""
    now = time.time() if now is None else now
    phase, started = phase_now(world, name, now)
    base = 1_073_741_824 * (world.names.index(name) + 3)
    moved = 0
    if started is not None and netdev == world.state(name)["rail"]["netdev"]:
        busy_for = now - started
        if phase in HUNG_PHASES:
            busy_for = min(busy_for, 40.0 * world.time_scale)  # it stopped when the collective did
        moved = int(max(0.0, busy_for) * 2.4e9)
    return {"tx_vport_rdma_unicast_bytes": base + moved, "rx_vport_rdma_unicast_bytes": base + moved // 2,
            "tx_vport_rdma_unicast_packets": (base + moved) // 4096, "rx_vport_rdma_unicast_packets":
            (base + moved // 2) // 4096}


def kernel_lines(world: World, name: str) -> list[tuple[float, str]]:
    """(time, message) of the station's kernel log: the lab's file (``fs/var/log/kern.log``: ``EPOCH
    MESSAGE`` lines), boot noise, and the ``kernel-errors`` fault's lines after the container started."""
    out: list[tuple[float, str]] = []
    created = float(world.meta.get("created_at", time.time()))
    out.append((created - 3600, "Linux version 6.11.0-1016-nvidia (buildd@lcy02) #16-Ubuntu SMP PREEMPT_DYNAMIC"))
    out.append((created - 3590, "mlx5_core 0000:01:00.1: firmware version: 28.45.1020"))
    path = world.station_dir(name) / "fs" / "var/log/kern.log"
    if path.exists():
        for raw in path.read_text().splitlines():
            t_s, _, msg = raw.partition(" ")
            try:
                out.append((float(t_s), msg))
            except ValueError:
                continue
    if "kernel-errors" in world.faults(name):
        c = world.state(name)["containers"].get("glm53") or {}
        runs = c.get("runs") or []
        t0 = float(runs[-1]["started_at"]) if runs else created
        netdev = world.state(name)["rail"]["netdev"]
        out += [(t0 + 5.0, f"mlx5_core 0000:01:00.1 {netdev}: Link down"),
                (t0 + 7.5, f"mlx5_core 0000:01:00.1 {netdev}: Link up"),
                (t0 + 8.0, "pcieport 0009:00:00.0: AER: Corrected error received: 0009:01:00.0"),
                (t0 + 8.0, "mlx5_core 0009:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
                           "(Receiver ID)"),
                (t0 + 9.2, "NVRM: Xid (PCI:0000:01:00): 119, pid=2757, name=VLLM::Worker_TP1, Timeout after 6s of "
                           "waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL)")]
    return sorted(out)
