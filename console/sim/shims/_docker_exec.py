"""``docker exec`` of the simulated docker CLI (console/sim/shims/docker.py), with the flight
recorder's dump pipe served the way ProcessGroupNCCL serves it."""

from __future__ import annotations

import os
import sys
import time

FR_ENV = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE")


def _serve_fr_pipe(ctx, pipe: str, dump: str, rank: int) -> None:
    """What ProcessGroupNCCL does with TORCH_NCCL_DEBUG_INFO_PIPE_FILE: a FIFO per rank; a write to it
    makes the rank dump its flight recorder (a pickle) to the temp file + rank."""
    import pickle
    import threading

    from console.sim.hang_sim import flight_recorder

    fifo = f"{pipe}{rank}.pipe"
    try:
        if not os.path.exists(fifo):
            os.mkfifo(fifo, 0o600)
    except OSError:
        return

    def serve() -> None:
        with open(fifo, "rb") as fh:
            fh.read(1)
        data = flight_recorder(ctx.world, ctx.station)
        if data is not None:
            with open(f"{dump}{rank}", "wb") as out:
                out.write(pickle.dumps(data, protocol=2))

    threading.Thread(target=serve, daemon=True).start()


def cmd_exec(args: list[str], ctx, inspect_data, no_such) -> int:
    """``docker exec [-i] [-t] [-e K=V] [-u U] [-w D] NAME CMD...``: CMD runs with the container's
    environment (its ``-e`` settings); the flight recorder's pipe and dump paths live in the
    container's own tree (``stations/NAME/container-fs``)."""
    import subprocess

    from console.sim.launch import run_env

    i, extra = 0, {}
    while i < len(args) and args[i].startswith("-"):
        if args[i] in ("-e", "--env", "-u", "--user", "-w", "--workdir"):
            if args[i] in ("-e", "--env") and i + 1 < len(args):
                k, _, v = args[i + 1].partition("=")
                extra[k] = v
            i += 2
            continue
        i += 1
    if i + 1 >= len(args):
        print('"docker exec" requires at least 2 arguments.', file=sys.stderr)
        return 1
    name, cmd = args[i], args[i + 1:]
    data = inspect_data(ctx, name, time.time())
    if data is None:
        return no_such(name)
    if data["State"]["Status"] != "running":
        print(f"Error response from daemon: container {data['Id']} is not running", file=sys.stderr)
        return 1
    runs = ctx.state["containers"][name]["runs"]
    env = dict(os.environ)
    env.update(run_env(runs[-1].get("args") if runs else []))
    env.update(extra)
    env["DGX_SIM_IN_CONTAINER"] = "1"
    root = ctx.world.station_dir(ctx.station) / "container-fs"
    for k in FR_ENV:
        if env.get(k):
            env[k] = str(root) + env[k]
    if env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE"):
        dump = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
        if not dump:
            dump = env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = str(root) + "/tmp/nccl_trace_rank_"
        for path in (env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], dump):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        _serve_fr_pipe(ctx, env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], dump, int(ctx.state["rank"]))
    try:
        return subprocess.run(cmd, env=env).returncode
    except FileNotFoundError:
        print(f"OCI runtime exec failed: exec failed: unable to start container process: exec: \"{cmd[0]}\": "
              "executable file not found in $PATH: unknown", file=sys.stderr)
        return 127
