"""Engine timelines of the simulated stations: which log lines a container run prints, how much
GPU memory it holds and when it exits, as a pure function of its start time, its profile and its
NCCL environment (``console.sim.launch``). ``console.sim.engine`` picks the timeline of each run.

Offsets are written in real seconds (a GB300 cold load takes ~420 s) and multiplied by the
world's ``time_scale``. Line formats follow shared/reference/engines.md (vLLM 0.30+ prefixes,
NCCL ``host:pid:tid [dev]``, uvicorn) so the real parsers and the diagnosis read them as they
would read a real station.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from console.config import Profile
from console.sim import launch
from console.sim.world import BASE_HOST_USED_MIB, held_mib

SHARDS = 50
GIB = float(1 << 30)
# The simulated vLLM's start-up memory besides weights and KV cache (the real engine's profiling
# run measures these): activation peak, non-torch buffers (NCCL, cuBLAS); CUDA graphs are logged.
SIM_ACTIVATION_GIB = 2.0
SIM_NON_TORCH_GIB = 0.7
SIM_GRAPHS_GIB = 1.21


def sim_kv_bytes_per_token(serving: dict[str, Any]) -> int:
    """What one token of the simulated GLM-5.3 costs in vLLM's cache: per layer a 656-byte
    fp8_ds_mla latent (1,152 bytes in bf16) plus the DSA indexer's 132-byte key; 78 layers, one more
    for the MTP draft layer when speculative decoding is on (its config.json, written by the sim)."""
    per_layer = (656 if str(serving.get("kv_cache_dtype") or "auto").startswith("fp8") else 1152) + 132
    return per_layer * (78 + (1 if serving.get("speculative_config") else 0))


def free_gib(profile: Profile, state: dict[str, Any]) -> float:
    """What the serving GPU (GB10: the unified memory) has free before a start: total minus what a
    leftover process or a leak holds."""
    gpu = next((g for g in state["gpus"] if g["serving"]), {})
    total = ((state["host_mem_total_mib"] - BASE_HOST_USED_MIB[True]) if profile.gpu.unified_memory
             else profile.gpu.memory_total_mib)
    return (total - held_mib(gpu)) / 1024


@dataclass
class Timeline:
    lines: list[tuple[float, str]] = field(default_factory=list)  # (offset s, already scaled)
    mem: list[tuple[float, float]] = field(default_factory=lambda: [(0.0, 0.0)])  # (offset, GiB)
    ready_at: float | None = None
    exit_at: float | None = None
    exit_code: int | None = None
    phases: list[tuple[float, str]] = field(default_factory=list)
    wedge_at: float | None = None  # the wedge fault: when the tokens stop (offset, scaled); None: never

    def mem_at(self, t: float) -> float:
        pts = self.mem
        if t <= pts[0][0]:
            return pts[0][1]
        for (t0, m0), (t1, m1) in zip(pts, pts[1:], strict=False):
            if t0 <= t <= t1:
                return m0 if t1 == t0 else m0 + (m1 - m0) * (t - t0) / (t1 - t0)
        return pts[-1][1]

    def phase_at(self, t: float) -> str:
        cur = "starting"
        for t0, name in self.phases:
            if t >= t0:
                cur = name
        return cur


class _Builder:
    def __init__(self, start: float, scale: float, engine: str, host: str, rank: int):
        self.tl = Timeline()
        self.start, self.scale, self.engine, self.host, self.rank = start, scale, engine, host, rank
        self.hold_from, self.hold = float("inf"), 0.0  # a head waiting for late workers: shift later events

    def ts(self, t: float) -> float:
        """Offset ``t`` (real engine seconds) in wall seconds since the start, after any wait."""
        return t * self.scale + (self.hold if t >= self.hold_from else 0.0)

    def secs(self, d: float) -> float:
        """A duration the engine logs ("took 239.4 seconds"), in the wall seconds it took here: the demo's
        line then agrees with the console's own clock beside it (never two clocks on one line)."""
        return d * self.scale

    def at(self, t: float, text: str, proc: str = "APIServer", pid: int = 1, level: str = "INFO",
           src: str = "api_server.py:1", raw: bool = False) -> None:
        ts = self.ts(t)
        if raw:
            line = text
        elif self.engine == "sglang":
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.start + ts))
            line = f"[{stamp} TP{self.rank}] {text}"
        else:
            stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(self.start + ts))
            line = f"({proc} pid={pid}) {level} {stamp} [{src}] {text}"
        self.tl.lines.append((ts, line))

    def nccl(self, t: float, text: str, pid: int = 412, warn_src: str | None = None) -> None:
        tid = pid + 118
        if warn_src:
            self.at(t, f"{self.host}:{pid}:{tid} [0] {warn_src} NCCL WARN {text}", raw=True)
        else:
            self.at(t, f"{self.host}:{pid}:{tid} [0] NCCL INFO {text}", raw=True)

    def mem(self, t: float, gib: float) -> None:
        self.tl.mem.append((self.ts(t), gib))

    def phase(self, t: float, name: str) -> None:
        self.tl.phases.append((self.ts(t), name))

    def exit(self, t: float, code: int) -> None:
        self.tl.exit_at = self.ts(t)
        self.tl.exit_code = code


# The ``hostile-log`` fault: what a compromised or broken container could print. Every line must
# reach the operator's screen and the CLI sanitized (no escape or control sequence), never as
# markup; the Gloo line among them is a real (warning) finding whose evidence carries an escape.
HOSTILE_LOG_LINES = (
    "\x1b]52;c;cHduZWQgY2xpcGJvYXJk\x07OSC 52 clipboard write",
    "\x1b]0;owned terminal title\x07OSC 0 title change",
    "\x1b[2J\x1b[Hclear screen and home",
    "\x1bP+q544e\x1b\\DCS query, \x1b_APC payload\x1b\\ and \x1b^PM\x1b\\",
    "NUL \x00 BEL \x07 BS \x08 DEL \x7f C1 CSI \x9b31m red \x9d0;c1 title\x9c end",
    "bidi \u202egnp.exe\u202c isolate \u2066x\u2069",
    "[/] [bold red]markup[/bold red] [link=file:///etc/passwd]link[/link] [@click=app.quit]quit[/]",
    "unterminated OSC \x1b]8;;http://198.18.0.1/",
    "a very long line: " + "A" * 300_000,
    "\x1b]0;x\x07[W socket.cpp:697] [c10d] Unable to resolve hostname to a (local) address. "
    "Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME.",
)


def _nccl_block(b: _Builder, t: float, profile: Profile, rail: dict[str, Any], faults: list[str],
                peer_count: int, env: dict[str, str] | None = None) -> None:
    """NCCL init lines; the transport follows the profile, the socket-fallback fault and the run's
    NCCL environment (NCCL_IB_DISABLE, NCCL_NET_GDR_LEVEL; every NCCL_* read is echoed, as NCCL does)."""
    env = env or {}
    b.nccl(t, f"Bootstrap : Using {rail['netdev']}:{rail['ip']}<0>")
    b.nccl(t, f"NCCL version {launch.nccl_version(env)}+cuda{'12.9' if launch.nccl_version(env) == launch.HOST_NCCL else '13.0'}")
    for line in launch.env_lines(env):
        b.nccl(t + 0.1, line)
    if "socket-fallback" in faults or env.get("NCCL_IB_DISABLE") == "1":
        if "socket-fallback" in faults:
            b.nccl(t + 0.2, "Failed to open libibverbs.so[.1]")
        b.nccl(t + 0.2, f"NET/Socket : Using [0]{rail['netdev']}:{rail['ip']}<0>")
        b.nccl(t + 0.3, "Using network Socket")
        b.nccl(t + 0.5, f"Channel 00/0 : {b.rank}[0] -> {(b.rank + 1) % peer_count}[0] [send] via NET/Socket/0")
        b.nccl(t + 0.5, f"Channel 01/0 : {b.rank}[0] -> {(b.rank + 1) % peer_count}[0] [send] via NET/Socket/1")
    else:
        rails = profile.link.rails or ("mlx5_0",)
        using = " ".join(f"[{i}]{r}:1/RoCE" for i, r in enumerate(rails))
        b.nccl(t + 0.2, f"NET/IB : Using {using} [RO]; OOB {rail['netdev']}:{rail['ip']}<0>")
        b.nccl(t + 0.3, "Using network IB")
        gdr = profile.link.gpudirect and env.get("NCCL_NET_GDR_LEVEL", "").upper() not in ("LOC", "0")
        for i, r in enumerate(rails):
            b.nccl(t + 0.3, f"NET/IB : GPU Direct RDMA {'Enabled' if gdr else 'Disabled'} for HCA {i} '{r}'")
        via = "NET/IB/0/GDRDMA" if gdr else "NET/IB/0"
        b.nccl(t + 0.5, f"Channel 00/0 : {b.rank}[0] -> {(b.rank + 1) % peer_count}[0] [send] via {via}")
        b.nccl(t + 0.5, f"Channel 01/0 : {b.rank}[0] -> {(b.rank + 1) % peer_count}[0] [send] via {via}")
        b.nccl(t + 0.6, f"Connected all rings, use ring PXN 0 GDR {1 if gdr else 0}")
    b.nccl(t + 0.7, f"comm 0x55d5c8a0{b.rank:02d} rank {b.rank} nranks {peer_count} cudaDev 0 nvmlDev "
                    f"{1 if profile.gpu.extra_display_gpu else 0} busId 1000 commId 0x8f3e21c4d7a9b001 - Init COMPLETE")


# Progress truth (the wedge and init-hang faults)
INIT_HANG_PHASE = "hung in first collective"
WEDGE_PHASE = "wedged (spinning)"
LOAD_PHASE = "serving under load"
#: Phases in which the GPUs spin at 100 % util at idle power (a kernel polling for a peer that never sends).
SPIN_PHASES = frozenset({INIT_HANG_PHASE, WEDGE_PHASE})
WEDGE_LOAD = 4  # the wedge fault's background requests (the users who were being served)
WEDGE_AFTER_S = 300.0  # engine seconds of serving before the wedge (demo, time scale 0.1: 30 s)


def _wedge(b: _Builder, cold: float, engine: str, head: bool) -> None:
    """Serving under WEDGE_LOAD requests, then the tokens stop: the engine's stats lines give way
    to vLLM's shared-memory broadcast warning (the head's engine core waits on its workers)."""
    t0, t1 = cold, cold + WEDGE_AFTER_S
    b.phase(t0, LOAD_PHASE)
    b.phase(t1, WEDGE_PHASE)
    b.tl.wedge_at = b.ts(t1)
    if not head:
        return
    for t in range(int(t0) + 10, int(t1), 10):
        if engine == "sglang":
            b.at(t, f"Decode batch, #running-req: {WEDGE_LOAD}, #token: {2100 + 40 * (t - int(t0))}, token usage: "
                    "0.03, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0")
        else:
            b.at(t, "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 144.9 tokens/s, "
                    f"Running: {WEDGE_LOAD} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit "
                    "rate: 0.0%", proc="APIServer", src="loggers.py:123")
    if engine == "vllm":
        for k in range(1, 31):
            b.at(t1 + 60 * k, "No available shared memory broadcast block found in 60 seconds. This typically "
                 "happens when some processes are hanging or doing some time-consuming work (e.g. compilation, "
                 "weight/kv cache quantization).", proc="EngineCore_DP0", pid=263, src="shm_broadcast.py:801")


def _watchdog(b: _Builder, t: float, seq: int, numel: int) -> None:
    """PyTorch's ProcessGroupNCCL watchdog (600 s): the collective ``seq`` never completed."""
    for dt_, tail in ((0.0, f"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
                            f"OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=600000) ran for "
                            "600043 milliseconds before timing out."),
                      (0.2, "[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with "
                            "exception: [Rank 0] Watchdog caught collective operation timeout")):
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(b.start + b.ts(t + dt_)))
        src = "ProcessGroupNCCL.cpp:632" if not dt_ else "ProcessGroupNCCL.cpp:2168"
        b.at(t + dt_, f"[rank0]:[E{stamp}.13{1931664 + int(dt_ * 10):07d} {src}] {tail}", raw=True)


def _oom_traceback(b: _Builder, t: float, proc: str, pid: int, total_gib: float) -> None:
    b.at(t, "WorkerProc failed to start.", proc=proc, pid=pid, level="ERROR", src="multiproc_executor.py:744")
    b.at(t, "Traceback (most recent call last):", raw=True)
    b.at(t, '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", '
            "line 718, in worker_main", raw=True)
    b.at(t, "    worker = WorkerProc(*args, **kwargs)", raw=True)
    b.at(t, '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/model_loader/'
            'default_loader.py", line 277, in load_weights', raw=True)
    b.at(t, f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total "
            f"capacity of {total_gib:.2f} GiB of which 1.12 GiB is free. Including non-PyTorch memory, this "
            f"process has {total_gib - 1.2:.2f} GiB memory in use.", raw=True)


def vllm_timeline(profile: Profile, state: dict[str, Any], faults: list[str], start: float, scale: float,
                  head_ip: str, peers_ok: bool, peer_fail_at: float | None, n: int,
                  join_delay: float = 0.0, env: dict[str, str] | None = None, collective_ok: bool = True,
                  hang_after_ready: bool = False, hangs: frozenset[str] = frozenset()) -> Timeline:
    rank = state["rank"]
    b = _Builder(start, scale, "vllm", state["hostname"], rank)
    tl = b.tl
    b.hold_from, b.hold = 8.0, join_delay  # the head waits here until the last worker joins
    g = profile.gpu
    s = profile.serving
    cold = g.cold_load_s
    total_gib = g.memory_total_mib / 1024
    worker_proc = f"Worker_TP{rank}"
    v = profile.engine_version
    b.phase(0, "starting")
    if rank == 0:
        args = {"model": profile.model_dir, "served_model_name": [profile.served_model_name],
                "tensor_parallel_size": profile.tensor_parallel, "nnodes": n, "node_rank": 0,
                "master_addr": head_ip, "max_model_len": s.get("max_model_len"),
                "gpu_memory_utilization": s.get("gpu_memory_utilization"),
                "kv_cache_dtype": s.get("kv_cache_dtype"), "max_num_seqs": s.get("max_num_seqs")}
        b.at(0.0, f"vLLM API server version {v}", src="api_server.py:1896")
        b.at(0.1, f"non-default args: {json.dumps({k: v for k, v in args.items() if v is not None})}",
             src="utils.py:233")
        b.at(2.0, f"Resolved architecture: {profile.architecture}", src="model.py:547")
        b.at(2.1, f"Using max model len {s.get('max_model_len', 98304)}", src="model.py:1510")
        b.at(3.0, f"Initializing a V1 LLM engine (v{v}) with config: model='{profile.model_dir}', "
                  f"tensor_parallel_size={profile.tensor_parallel}, quantization=modelopt_fp4",
             proc="EngineCore_DP0", pid=263, src="core.py:93")
    else:
        b.at(0.0, f"Launching vLLM (v{v}) headless multiproc executor, with head node address {head_ip} "
                  "for torch.distributed process group.", src="api_server.py:1830")
    b.mem(0, 0.0)
    b.mem(6, 0.6)
    b.phase(4, "connecting")
    if rank == 0 and not peers_ok:
        b.at(8, f"world_size={n} rank=0 local_rank=0 distributed_init_method=tcp://{head_ip}:29501 "
                "backend=nccl", proc=worker_proc, pid=412, src="parallel_state.py:1134")
        b.at(601, "Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
             proc=worker_proc, pid=412, level="ERROR", src="multiproc_executor.py:744")
        b.at(601.1, "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. "
                    f"1/{n} clients joined.", raw=True)
        b.at(601.5, "Engine core initialization failed. See root cause above. Failed core proc(s): {}",
             proc="APIServer", level="ERROR", src="core_client.py:692")
        b.phase(8, "waiting for workers")
        b.exit(602, 1)
        return tl
    b.at(8, f"world_size={n} rank={rank} local_rank=0 distributed_init_method=tcp://{head_ip}:29501 "
            "backend=nccl", proc=worker_proc, pid=412, src="parallel_state.py:1134")
    _nccl_block(b, 9, profile, state["rail"], faults, n, env)
    if "hostile-log" in faults:
        for i, line in enumerate(HOSTILE_LOG_LINES):
            b.at(9.5 + i * 0.01, line, raw=True)
    if "init-hang" in hangs:  # every rank spins in the first collective; the log says nothing more
        b.phase(10, INIT_HANG_PHASE)
        return tl
    if not collective_ok:  # the first collective (pynccl's warm-up all-reduce of one element) never completes
        b.phase(10, "waiting on collective")
        if rank != 0:
            return tl  # the worker waits in it until stopped; the head's watchdog gives up after 600 s
        _watchdog(b, 610, 1, 1)
        b.at(611, "Engine core initialization failed. See root cause above. Failed core proc(s): "
                  "{'EngineCore_DP0': -6}", proc="APIServer", level="ERROR", src="core_client.py:692")
        b.exit(612, 1)
        return tl
    load0, load1 = 12.0, 12.0 + 0.57 * cold
    b.phase(load0, "loading weights")
    b.at(load0, f"Starting to load model {profile.model_dir}...", proc=worker_proc, pid=412,
         src="gpu_model_runner.py:2602")
    weights = g.weights_gib
    room = free_gib(profile, state) - 0.6
    oom = weights > room  # a leftover process (the oom fault) or a leak leaves too little
    stop_at = load0 + min(0.95, max(0.05, room / weights)) * (load1 - load0) if oom else load1
    step = max(1, SHARDS // 10)
    for k in range(0, SHARDS + 1, step):
        t = load0 + (load1 - load0) * k / SHARDS
        if t > stop_at:
            break
        pct = int(100 * k / SHARDS)
        el, left = int(b.secs(t - load0)), int(b.secs(load1 - t))
        b.at(t, f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {k}/{SHARDS} "
                f"[{el // 60:02d}:{el % 60:02d}<{left // 60:02d}:{left % 60:02d}, "
                f"{b.secs(load1 - load0) / SHARDS:.2f}s/it]", raw=True)
    b.mem(load0, 0.6)
    if oom:
        b.mem(stop_at, 0.6 + room)
        _oom_traceback(b, stop_at + 0.5, worker_proc, 412, total_gib)
        b.at(stop_at + 1, "Engine core initialization failed. See root cause above. Failed core proc(s): {}",
             proc="EngineCore_DP0" if rank == 0 else "APIServer", level="ERROR", src="core_client.py:692")
        b.mem(stop_at + 1.5, 0.0)
        b.phase(stop_at + 0.5, "failed")
        b.exit(stop_at + 2, 1)
        return tl
    b.mem(load1, 0.6 + weights)
    b.at(load1, f"Loading weights took {b.secs(load1 - load0 - 2):.2f} seconds", proc=worker_proc, pid=412,
         src="default_loader.py:268")
    b.at(load1 + 1.5, f"Model loading took {weights:.2f} GiB memory and {b.secs(load1 - load0):.6f} seconds",
         proc=worker_proc, pid=412, src="gpu_model_runner.py:2677")
    if "remove-ipc" in faults and rank == 0:
        # logind removed the launch user's IPC objects when the SSH session that started the run
        # closed (RemoveIPC=yes, no linger): the head's shared-memory broadcast waits forever and no
        # watchdog fires (eugr/spark-vllm-docker #352). The remove-ipc check says so before a launch.
        b.phase(load1 + 2, "blocked on shared memory")
        for k in range(1, 11):
            b.at(load1 + 2 + 60 * k, "No available shared memory broadcast block found in 60 seconds. This "
                 "typically happens when some processes are hanging or doing some time-consuming work (e.g. "
                 "compilation, weight/kv cache quantization).", proc="EngineCore_DP0", pid=263,
                 src="shm_broadcast.py:801")
        return tl
    if peer_fail_at is not None and rank == 0:
        t_fail = max(load1 + 2, (peer_fail_at - start) / scale + 15)
        b.at(t_fail, "NCCL error: remote process exited or there was a network error, NCCL version 2.30.7",
             proc=worker_proc, pid=412, level="ERROR", src="multiproc_executor.py:744")
        b.at(t_fail + 0.5, "Engine core initialization failed. See root cause above. Failed core proc(s): "
                           "{'EngineCore_DP0': 1}", proc="APIServer", level="ERROR", src="core_client.py:692")
        b.phase(t_fail, "failed")
        b.mem(t_fail + 1, 0.0)
        b.exit(t_fail + 1.5, 1)
        return tl
    kv_t = load1 + 0.25 * (cold - load1)
    b.phase(load1 + 2, "profiling / KV cache")
    util = float(s.get("gpu_memory_utilization") or 0.9)
    kv_gib = util * total_gib - weights - SIM_ACTIVATION_GIB - SIM_NON_TORCH_GIB - SIM_GRAPHS_GIB
    bpt = sim_kv_bytes_per_token(s)
    mml = int(s.get("max_model_len") or 98304)
    tokens = max(0, int(kv_gib * GIB / bpt)) // 16 * 16
    need = mml * bpt / GIB
    if need > kv_gib and rank == 0:  # physics (the kv-too-small fault's 1M context); the head's engine core decides
        b.at(kv_t, f"Available KV cache memory: {kv_gib:.2f} GiB", proc=worker_proc, pid=412,
             src="gpu_worker.py:298")
        if kv_gib <= 0:
            b.at(kv_t + 0.5, "ValueError: No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization` when initializing the engine.", raw=True)
        else:
            b.at(kv_t + 0.5, f"ValueError: To serve at least one request with the models's max seq len "
                             f"({mml}), ({need:.2f} GiB KV cache is needed, which is larger than the available KV "
                             f"cache memory ({kv_gib:.2f} GiB). Based on the available memory, the estimated "
                             f"maximum model length is {tokens}. Try increasing `gpu_memory_utilization` or "
                             "decreasing `max_model_len` when initializing the engine.", raw=True)
        b.at(kv_t + 1, "Engine core initialization failed. See root cause above. Failed core proc(s): "
                       "{'EngineCore_DP0': 1}", proc="APIServer", level="ERROR", src="core_client.py:692")
        b.phase(kv_t + 0.5, "failed")
        b.mem(kv_t + 1.5, 0.0)
        b.exit(kv_t + 2, 1)
        return tl
    b.at(kv_t, f"Available KV cache memory: {kv_gib:.2f} GiB", proc=worker_proc, pid=412, src="gpu_worker.py:298")
    b.mem(kv_t, g.loaded_gib - 1.2)
    if rank == 0:
        b.at(kv_t + 0.5, f"GPU KV cache size: {tokens:,} tokens", proc="EngineCore_DP0", pid=263,
             src="kv_cache_utils.py:1087")
        b.at(kv_t + 0.5, f"Maximum concurrency for {mml:,} tokens per request: {tokens / mml:.2f}x",
             proc="EngineCore_DP0", pid=263, src="kv_cache_utils.py:1091")
    g0, g1 = kv_t + 5, cold - 20
    b.phase(g0, "capturing CUDA graphs")
    if "worker-dies" in faults and rank != 0:
        b.at(g0 + 10, "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
             proc="APIServer", level="ERROR", src="multiproc_executor.py:229")
        b.phase(g0 + 10, "failed")
        b.mem(g0 + 10.5, 0.0)
        b.exit(g0 + 11, 1)
        return tl
    if rank == 0:
        for k in range(0, 36, 7):
            b.at(g0 + (g1 - g0) * k / 35, f"Capturing CUDA graphs (decode, FULL): {int(100 * k / 35):3d}%| "
                                          f"{k}/35 [00:{int(b.secs(g1 - g0) * k / 35) % 60:02d}<00:00]", raw=True)
    b.at(g1, f"Graph capturing finished in {b.secs(g1 - g0):.0f} secs, took 1.21 GiB", proc=worker_proc, pid=412,
         src="gpu_model_runner.py:3480")
    b.mem(g1, g.loaded_gib)
    if rank != 0:
        b.phase(g1 + 1, "serving (worker)")
        tl.ready_at = b.ts(g1 + 1)
        if hang_after_ready:
            b.phase(cold + 30, "hung in all-reduce")
        if "stall-cycle" in hangs:
            b.phase(cold, LOAD_PHASE)  # the stall-cycle fault's users being served
        if "wedge" in hangs:
            _wedge(b, cold, "vllm", head=False)
        return tl
    b.at(g1 + 2, f"init engine (profile, create kv cache, warmup model) took {b.secs(g1 + 2 - load1):.2f} s",
         proc="EngineCore_DP0", pid=263, src="core.py:210")
    b.at(cold - 4, f"Starting vLLM server on http://0.0.0.0:{profile.api_port}", src="api_server.py:1978")
    b.at(cold - 3, "INFO:     Started server process [1]", raw=True)
    b.at(cold - 2.9, "INFO:     Waiting for application startup.", raw=True)
    b.at(cold - 2.8, "INFO:     Application startup complete.", raw=True)
    b.phase(cold - 2.8, "ready")
    tl.ready_at = b.ts(cold - 2.8)
    if "stall-cycle" in hangs:
        b.phase(cold, LOAD_PHASE)
    if "wedge" in hangs:
        _wedge(b, cold, "vllm", head=True)
    if hang_after_ready:  # serving, then both ranks stop inside one all-reduce (a software deadlock)
        b.phase(cold + 30, "hung in all-reduce")
        for k in (1, 2, 3):
            b.at(cold + 30 + 60 * k, "No available shared memory broadcast block found in 60 seconds. This "
                 "typically happens when some processes are hanging or doing some time-consuming work (e.g. "
                 "compilation, weight/kv cache quantization).", proc="EngineCore_DP0", pid=263,
                 src="shm_broadcast.py:801")
        _watchdog(b, cold + 630, 48213, 12582912)
        b.exit(cold + 632, 1)
    return tl


def sglang_timeline(profile: Profile, state: dict[str, Any], faults: list[str], start: float, scale: float,
                    head_ip: str, peers_ok: bool, peer_fail_at: float | None, n: int,
                    join_delay: float = 0.0, env: dict[str, str] | None = None, collective_ok: bool = True,
                    hang_after_ready: bool = False, hangs: frozenset[str] = frozenset()) -> Timeline:
    rank = state["rank"]
    b = _Builder(start, scale, "sglang", state["hostname"], rank)
    tl = b.tl
    b.hold_from, b.hold = 3.0, join_delay  # the head waits here until the last worker joins
    g = profile.gpu
    s = profile.serving
    cold = g.cold_load_s
    b.phase(0, "starting")
    b.at(0, f"server_args=ServerArgs(model_path='{profile.model_dir}', tp_size={profile.tensor_parallel}, "
            f"nnodes={n}, node_rank={rank}, dist_init_addr='{head_ip}:{s.get('dist_init_port', 20000)}', "
            f"mem_fraction_static={s.get('mem_fraction_static', 0.84)}, "
            f"max_running_requests={s.get('max_running_requests')}, port={profile.api_port})")
    b.at(2, "Init torch distributed begin.")
    b.mem(0, 0.0)
    b.mem(3, 0.45)
    b.phase(2, "connecting")
    if rank == 0 and not peers_ok:
        b.phase(3, "waiting for workers")
        b.at(601, "RuntimeError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.")
        b.phase(601, "failed")
        b.exit(602, 1)
        return tl
    _nccl_block(b, 4, profile, state["rail"], faults, n, env)
    if "hostile-log" in faults:
        for i, line in enumerate(HOSTILE_LOG_LINES):
            b.at(4.5 + i * 0.01, line, raw=True)
    if "init-hang" in hangs:
        b.phase(5, INIT_HANG_PHASE)
        return tl
    if not collective_ok:
        b.phase(5, "waiting on collective")
        if rank != 0:
            return tl
        _watchdog(b, 605, 1, 1)
        b.phase(606, "failed")
        b.exit(606, 1)
        return tl
    b.at(6, "Init torch distributed ends. mem usage=0.45 GB")
    load0, load1 = 8.0, 8.0 + 0.7 * cold
    b.phase(load0, "loading weights")
    room = free_gib(profile, state) - 0.45
    avail = room
    b.at(load0, f"Load weight begin. avail mem={avail:.2f} GB")
    b.mem(load0, 0.45)
    oom = g.weights_gib > room  # a leftover process (the oom fault) or a leak leaves too little
    stop_at = load0 + min(0.95, max(0.05, room / g.weights_gib)) * (load1 - load0) if oom else load1
    for k in range(0, 41, 4):
        t = load0 + (load1 - load0) * k / 40
        if t > stop_at:
            break
        b.at(t, f"Loading safetensors checkpoint shards: {int(100 * k / 40):3d}% Completed | {k}/40", raw=True)
    if oom:
        b.mem(stop_at, 0.45 + room)
        b.at(stop_at + 0.5, "Scheduler hit an exception: Traceback (most recent call last):")
        b.at(stop_at + 0.5, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                            "total capacity of 119.70 GiB of which 1.31 GiB is free.", raw=True)
        b.phase(stop_at + 0.5, "failed")
        b.mem(stop_at + 1, 0.0)
        b.exit(stop_at + 1.5, 1)
        return tl
    b.mem(load1, 0.45 + g.weights_gib)
    b.at(load1, f"Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem="
                f"{avail - g.weights_gib:.2f} GB, mem usage={g.weights_gib:.2f} GB.")
    b.phase(load1 + 1, "state / KV cache")
    # SGLang's pool: what is free after the load minus the (1 - mem_fraction_static) share; the
    # hybrid model gives ~30 % of it to the linear-attention state cache, the rest to the KV cache
    # of its 12 MLA layers (bf16 latent, 1,152 bytes per token and layer).
    total = (state["host_mem_total_mib"] if g.unified_memory else g.memory_total_mib) / 1024
    pool = avail - g.weights_gib - (1 - float(s.get("mem_fraction_static") or 0.88)) * total
    kv_size = max(0.0, 0.7 * pool)
    tokens = int(kv_size * GIB / (12 * 1152))
    b.at(load1 + 5, f"KV Cache is allocated. #tokens: {tokens}, KV size: {kv_size:.2f} GB")
    b.mem(load1 + 5, g.loaded_gib - 0.4)
    g0, g1 = load1 + 8, cold - 6
    b.phase(g0, "capturing CUDA graphs")
    b.at(g0, "Capture cuda graph begin. This can take up to several minutes. avail mem=17.31 GB")
    b.at(g1, f"Capture cuda graph end. Time elapsed: {g1 - g0:.2f} s. mem usage=0.42 GB. avail mem=16.89 GB.")
    b.mem(g1, g.loaded_gib)
    # the scheduler's limits come once its model runner is up (after the graphs), as SGLang prints them
    b.at(g1 + 0.5, f"max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                   f"max_running_requests={s.get('max_running_requests', 2)}, context_len="
                   f"{s.get('context_length', 65536)}, available_gpu_mem=17.20 GB")
    if rank != 0:
        b.phase(g1 + 1, "serving (worker)")
        tl.ready_at = b.ts(g1 + 1)
        if "stall-cycle" in hangs:
            b.phase(cold, LOAD_PHASE)  # the stall-cycle fault's users being served
        if "wedge" in hangs:
            _wedge(b, cold, "sglang", head=False)
        return tl
    b.at(cold - 4, "INFO:     Started server process [1]", raw=True)
    b.at(cold - 3.9, "INFO:     Waiting for application startup.", raw=True)
    b.at(cold - 3.8, "INFO:     Application startup complete.", raw=True)
    b.at(cold - 3.7, f"INFO:     Uvicorn running on http://0.0.0.0:{profile.api_port} (Press CTRL+C to quit)",
         raw=True)
    b.at(cold - 2, 'INFO:     127.0.0.1:39442 - "GET /model_info HTTP/1.1" 200 OK', raw=True)
    b.at(cold - 1, "The server is fired up and ready to roll!")
    b.phase(cold - 1, "ready")
    tl.ready_at = b.ts(cold - 1)
    if "stall-cycle" in hangs:
        b.phase(cold, LOAD_PHASE)
    if "wedge" in hangs:
        _wedge(b, cold, "sglang", head=True)
    return tl
