"""What the simulated stations show the NCCL workbench (``dgx-console doctor``) at a given moment:
the serving container's phase, its processes and their ``py-spy`` stacks, the RDMA and NIC
counters, the kernel log.

Pure functions of the world state, the engine (``console.sim.engine``) and the clock, so the
``docker top``, ``py-spy``, ``rdma statistic``, ``ethtool -S``, ``journalctl`` and ``dmesg`` shims
agree without talking to each other.
"""

from __future__ import annotations

import time

from console.probes.activity import RETRY_COUNTERS
from console.sim.engine import container_status
from console.sim.launch import all_faults
from console.sim.timelines import INIT_HANG_PHASE, WEDGE_PHASE
from console.sim.world import World

# ------------------------------------------------------------------ live state


def phase_now(world: World, name: str, now: float | None = None) -> tuple[str, float | None]:
    """(timeline phase label, container start time) of the serving container, ("down", None) if not up."""
    now = time.time() if now is None else now
    st = container_status(world, name, world.state(name), "glm53", now)
    if st["state"] != "running":
        return "down", None
    started = float(st["started_at"])
    return st["timeline"].phase_at(now - started), started


# Phases in which no collective completes: the RDMA counters stand still (the wedge and init-hang
# faults' phases too: their ranks spin inside a collective)
HUNG_PHASES = ("waiting on collective", "hung in all-reduce", INIT_HANG_PHASE, WEDGE_PHASE)


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


_NATIVE_SYNC = ("__sched_yield (libc.so.6)", "0x7f3c2e1b4a10 (libcuda.so.580.95.05)",
                "cudaStreamSynchronize (libcudart.so.13)")
_NATIVE_NCCL = ("0x7f3c2e1b4a10 (libcuda.so.580.95.05)", "ncclAllReduce (libnccl.so.2)")
_NATIVE_POLL = ("__poll (libc.so.6)",)


def pyspy_dump(world: World, name: str, pid: int, now: float | None = None, native: bool = False) -> str | None:
    """What ``py-spy dump [--native] --pid PID`` prints for an engine process now (None: no such
    process). ``native``: the C/CUDA frames above the Python ones, innermost first, as py-spy merges them."""
    procs = dict(engine_processes(world, name, now))
    if pid not in procs:
        return None
    phase, _started = phase_now(world, name, now)
    cmd = procs[pid]
    worker = "Worker" in cmd or "scheduler" in cmd
    status = "idle"
    if worker:
        if phase in ("waiting on collective", INIT_HANG_PHASE):
            frames, status = _INIT_COLLECTIVE, "active"
        elif phase == "hung in all-reduce" and "desync" in world.faults_now(name):
            frames = _IDLE_WORKER  # one step behind: waits for work it never got, not in the collective
        elif phase in ("hung in all-reduce", WEDGE_PHASE):
            frames, status = _FORWARD_COLLECTIVE, "active"
        elif phase in ("loading weights", "profiling / KV cache", "capturing CUDA graphs", "state / KV cache"):
            frames, status = _LOADING, "active+gil"
        else:
            frames = _IDLE_WORKER
    elif "EngineCore" in cmd:
        frames = _ENGINE_IDLE
    else:
        frames = _API_LOOP
    if native:
        frames = {_INIT_COLLECTIVE: _NATIVE_SYNC, _FORWARD_COLLECTIVE: _NATIVE_NCCL}.get(frames, _NATIVE_POLL) + frames
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
    # The worker-dies fault's cause as the host's kernel says it (the worker dies with -9)
    if "worker-dies" in world.faults(name):
        runs = ((world.state(name)["containers"].get("glm53") or {}).get("runs") or [])
        t0 = float(runs[-1]["started_at"]) if runs else created
        out += [(t0 + 30.0, "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=docker-glm53.scope,"
                            "mems_allowed=0,global_oom,task=VLLM::Worker_TP,pid=412,uid=0"),
                (t0 + 30.0, "Out of memory: Killed process 412 (VLLM::Worker_TP) total-vm:131402388kB, "
                            "anon-rss:118214712kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:236112kB oom_score_adj:0")]
    out += xid_lines(world, name)
    out += flap_lines(world, name)
    if "gpu-lost" in world.faults(name):  # the driver's word for the GPU nvidia-smi cannot read
        out.append((created + 1.0, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, "
                                   "GPU has fallen off the bus."))
    return sorted(out)


def flap_lines(world: World, name: str) -> list[tuple[float, str]]:
    """The ``rail-flap`` fault as mlx5 logs it on both ends: ``Link down`` then ``Link up`` each period
    (the last ten minutes of it, and the next period: journalctl -f prints a line once it is due)."""
    from console.sim.shims._net import FLAP_DOWN_S, FLAP_PERIOD_S

    flapping = [n for n in world.names if "rail-flap" in world.faults(n)]
    if not flapping:
        return []
    t0, now = world.fault_since(flapping[0], "rail-flap"), time.time()
    netdev = world.state(name)["rail"]["netdev"]
    out: list[tuple[float, str]] = []
    k = max(0, int((now - 600.0 - t0) // FLAP_PERIOD_S))
    while (down := t0 + k * FLAP_PERIOD_S) <= now + FLAP_PERIOD_S:
        out += [(down, f"mlx5_core 0000:01:00.1 {netdev}: Link down"),
                (down + FLAP_DOWN_S, f"mlx5_core 0000:01:00.1 {netdev}: Link up")]
        k += 1
    return out


def xid_lines(world: World, name: str) -> list[tuple[float, str]]:
    """The ``xid`` fault: an Xid 48 then an Xid 79 for the serving GPU, 1 s and 2 s after the
    fault was set, in the driver's words (NVIDIA's Xid catalogue; the bus id as the driver prints it)."""
    if "xid" not in world.faults(name):
        return []
    t0 = world.fault_since(name, "xid")
    gpus = world.state(name)["gpus"]
    g = next((x for x in gpus if x["serving"]), gpus[0])
    pci = f"PCI:{g['index']:04x}:01:00"
    return [(t0 + 1.0, f"NVRM: Xid ({pci}): 48, pid=2757, name=VLLM::Worker_TP0, An uncorrectable double bit "
                       "error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 1."),
            (t0 + 2.0, f"NVRM: Xid ({pci}): 79, pid=2757, name=VLLM::Worker_TP0, GPU has fallen off the bus.")]
