"""``ps`` on a simulated station: the GPU processes the station's nvidia-smi lists, in procps' format
for the two column sets the console asks for (``cmdlines.process_details`` and ``process_running``):
the engine (root, in the serving container) and the oom fault's leftover process (the login user's
forgotten benchmark on the host, under the login user). Each has a start time (``lstart``, C locale); a
GPU entry's ``held_args`` / ``held_started_at`` stand in for another process that the kernel gave the
leftover's pid to (a test's pid reuse). Other arguments run the real ``ps``."""

from __future__ import annotations

import getpass
import os
import time

from console.sim.shims.docker import inspect_data
from console.sim.shims.nvidia_smi import _DEFAULT_PIDS, gpu_values

HELD_ARGS = "python3 /home/ops/bench/fp8_matmul_sweep.py --device cuda:0 --keep-alive"


def lstart(epoch: float) -> str:
    """procps' ``lstart`` in the C locale: ``Sat Dec  5 14:12:43 2026``."""
    t = time.localtime(epoch)
    return time.strftime("%a %b ", t) + f"{t.tm_mday:>2}" + time.strftime(" %H:%M:%S %Y", t)


def processes(ctx) -> dict[int, dict]:
    """pid -> row facts of the processes this station's GPUs hold now."""
    now = time.time()
    out: dict[int, dict] = {}
    vals = gpu_values(ctx, now)
    if any(v.get("_engine_mib", 0) > 1 for v in vals):
        data = inspect_data(ctx, "glm53", now) or {}
        pid = _DEFAULT_PIDS.get(ctx.state["rank"], 2347)
        runs = (ctx.state["containers"].get("glm53") or {}).get("runs") or [{}]
        started = float(runs[-1].get("started_at") or 1_796_000_000)
        out[pid] = {"engine": True, "user": "root", "pcpu": "97.4", "rss": 41_231_360, "stat": "Rl",
                    "lstart": lstart(started),
                    "cgroup": f"0::/system.slice/docker-{data.get('Id', '0' * 64)}.scope",
                    "args": "python3 -m vllm.entrypoints.openai.api_server --model /models/glm-5.3 "
                            "--tensor-parallel-size 2"}
    for g in ctx.state["gpus"]:
        if g.get("held_mib"):
            out[int(g.get("held_pid", 4242))] = {
                "user": getpass.getuser(), "pcpu": "0.4", "rss": 2_203_648, "stat": "Sl",
                "cgroup": str(g.get("held_cgroup", "0::/user.slice/user-1000.slice/session-7.scope")),
                "lstart": lstart(float(g.get("held_started_at", 1_796_000_000))),
                "args": str(g.get("held_args", HELD_ARGS))}
    return out


def listeners(ctx) -> dict[int, dict]:
    """The api-port-taken fault's process: the login user's forgotten vLLM on the host, on the API port."""
    if "api-port-taken" not in ctx.faults:
        return {}
    from console.sim.shims.ss import FOREIGN_LISTENER_PID

    port = ctx.profile.api_port
    return {FOREIGN_LISTENER_PID: {
        "user": getpass.getuser(), "pcpu": "1.2", "rss": 1_048_576, "stat": "Sl",
        "cgroup": "0::/user.slice/user-1000.slice/session-3.scope", "lstart": lstart(1_796_000_000),
        "args": f"python3 -m vllm.entrypoints.openai.api_server --model /models/qwen3-8b --port {port}"}}


def main(argv: list[str], ctx) -> int:
    fields = pids = None
    i = 0
    while i < len(argv):
        if argv[i] == "-o" and i + 1 < len(argv):
            fields, i = argv[i + 1], i + 2
        elif argv[i] == "-p" and i + 1 < len(argv):
            pids, i = argv[i + 1], i + 2
        elif argv[i] == "-ww":
            i += 1
        else:
            real = next(p for p in ("/usr/bin/ps", "/bin/ps") if os.path.exists(p))
            os.execv(real, [real, *argv])
    if fields is None or pids is None:
        real = next(p for p in ("/usr/bin/ps", "/bin/ps") if os.path.exists(p))
        os.execv(real, [real, *argv])
    names = [f.split("=")[0].split(":")[0] for f in fields.split(",")]
    procs = {**processes(ctx), **listeners(ctx)}
    found = 0
    for raw in pids.split(","):
        if not raw.strip().isdigit() or int(raw) not in procs:
            continue
        p = {**procs[int(raw)], "pid": raw.strip()}
        cells = [f"{p['pid']:>7}" if n == "pid" else str(p[n]) for n in names]
        print(" ".join(cells))
        found += 1
    return 0 if found else 1
