"""Simulated ``docker`` CLI for the one serving container per station.

Supports what the console and the launch scripts use: ``inspect``/``ps``/``logs [-f] [-t]
[--tail N]``/``events``/``start``/``stop``/``run -d --name``/``rm``, with the daemon's error
messages. Go templates are rendered for ``{{.A.B}}`` and ``{{json .A.B}}`` fields.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import sys
import time

from console.sim.engine import container_status, log_lines, start_container, stop_container
from console.sim.shims._docker_exec import cmd_exec
from console.sim.shims._docker_images import SIZE as IMAGE_SIZE
from console.sim.shims._docker_images import cmd_load, cmd_save


def rfc3339(t: float | None) -> str:
    if not t:
        return "0001-01-01T00:00:00Z"
    d = dt.datetime.fromtimestamp(t, dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond * 1000:09d}Z"


def container_id(station: str, name: str) -> str:
    return hashlib.sha256(f"{station}/{name}".encode()).hexdigest()


def inspect_data(ctx, name: str, now: float) -> dict | None:
    state = ctx.state
    c = state["containers"].get(name)
    if c is None or c["state"] == "absent":
        return None
    st = container_status(ctx.world, ctx.station, state, name, now)
    run = c["runs"][-1] if c["runs"] else {}
    status = st["state"]
    exit_code = st.get("exit_code") or 0
    return {
        "Id": container_id(ctx.station, name),
        "Name": "/" + name,
        "State": {
            "Status": status,
            "Running": status == "running",
            "Paused": False,
            "Restarting": False,
            "OOMKilled": False,
            "Dead": False,
            "Pid": 2345 if status == "running" else 0,
            "ExitCode": 0 if status == "running" else int(exit_code),
            "Error": "",
            "StartedAt": rfc3339(run.get("started_at")),
            "FinishedAt": rfc3339(st.get("finished_at")) if status == "exited" else "0001-01-01T00:00:00Z",
        },
        "Image": c["image_id"],
        "HostConfig": {"NetworkMode": "host", "IpcMode": "host"},
        **_run_config(run.get("args") or [], c["image"]),
    }


IMAGE_ENV = ["PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "CUDA_VERSION=13.0.2"]


def _run_config(args: list[str], image: str) -> dict:
    """Path/Args and Config.Env/Cmd/Entrypoint of a container from its ``docker run`` arguments."""
    env = list(IMAGE_ENV)
    entry: list[str] | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-e", "--env") and i + 1 < len(args):
            k, sep, _v = args[i + 1].partition("=")
            item = args[i + 1] if sep else (f"{k}={os.environ[k]}" if k in os.environ else None)
            if item is not None:
                env = [x for x in env if x.split("=", 1)[0] != k] + [item]
            i += 2
            continue
        if a == "--entrypoint" and i + 1 < len(args):
            entry = [args[i + 1]]
            i += 2
            continue
        if a in _RUN_VALUE_FLAGS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        break
    cmd = args[i + 1:] if i < len(args) else []
    proc = (entry or []) + cmd
    return {"Path": proc[0] if proc else "", "Args": proc[1:],
            "Config": {"Image": image, "Env": env, "Cmd": cmd, "Entrypoint": entry}}


def go_duration_s(text: str) -> float:
    """``docker ... --since 30s|2m|1h30m`` (relative to now); a Unix or RFC3339 time is treated as
    "replay nothing" since only the relative form is used by the console."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return 0.0
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def render(template: str, data: dict) -> str:
    def lookup(path: str):
        cur = data
        for part in path.strip(".").split("."):
            if not part:
                continue
            cur = cur.get(part) if isinstance(cur, dict) else None
        return cur

    def sub(m: re.Match) -> str:
        expr = m.group(1).strip()
        if expr.startswith("json "):
            return json.dumps(lookup(expr[5:].strip()), separators=(",", ":"))
        val = lookup(expr)
        if isinstance(val, bool):
            return "true" if val else "false"
        return "" if val is None else str(val)

    return re.sub(r"\{\{(.*?)\}\}", sub, template)


def _parse_since(value: str) -> float:
    """``--since`` takes a Unix timestamp or an RFC3339 time (with up to nanoseconds)."""
    try:
        return float(value)
    except ValueError:
        pass
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z?$", value)
    if not m:
        raise SystemExit(f'invalid value for "since": {value}')
    base = dt.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp()
    return base + (float("0." + m.group(2)) if m.group(2) else 0.0)


def _no_such(name: str) -> int:
    print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
    return 1


def cmd_inspect(args: list[str], ctx) -> int:
    fmt = None
    names = []
    i = 0
    while i < len(args):
        if args[i] in ("--format", "-f"):
            fmt = args[i + 1]
            i += 2
            continue
        if args[i].startswith("--format="):
            fmt = args[i].split("=", 1)[1]
        elif args[i] == "--type":
            i += 1
        else:
            names.append(args[i])
        i += 1
    rc = 0
    out = []
    for name in names:
        data = inspect_data(ctx, name, time.time())
        if data is None:
            print(f"Error: No such object: {name}", file=sys.stderr)
            rc = 1
            continue
        out.append(render(fmt, data) if fmt else json.dumps([data], indent=4))
    if out:
        print("\n".join(out))
    return rc


def cmd_ps(args: list[str], ctx) -> int:
    show_all = "-a" in args or "--all" in args
    fmt = None
    for i, a in enumerate(args):
        if a == "--format":
            fmt = args[i + 1]
    rows = []
    now = time.time()
    for name in ctx.state["containers"]:
        data = inspect_data(ctx, name, now)
        if data is None or (not show_all and data["State"]["Status"] != "running"):
            continue
        status = "Up" if data["State"]["Status"] == "running" else f"Exited ({data['State']['ExitCode']})"
        row = {"ID": data["Id"][:12], "Image": data["Config"]["Image"], "Names": name, "Status": status,
               "State": data["State"]["Status"]}
        rows.append(render(fmt, row) if fmt else
                    f"{row['ID']}   {row['Image']}   \"vllm serve\"   {status}   {name}")
    if not fmt:
        print("CONTAINER ID   IMAGE   COMMAND   STATUS   NAMES")
    for r in rows:
        print(r)
    return 0


def cmd_logs(args: list[str], ctx) -> int:
    follow = stamps = False
    tail = None
    since = None
    name = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-f", "--follow"):
            follow = True
        elif a in ("-t", "--timestamps"):
            stamps = True
        elif a in ("-n", "--tail"):
            i += 1
            tail = None if args[i] == "all" else int(args[i])
        elif a == "--since":
            i += 1
            since = _parse_since(args[i])
        elif a.startswith("--tail="):
            v = a.split("=", 1)[1]
            tail = None if v == "all" else int(v)
        else:
            name = a
        i += 1
    if name is None or name not in ctx.state["containers"]:
        return _no_such(name or "")

    def fmt(t: float, line: str) -> str:
        return f"{rfc3339(t)} {line}" if stamps else line

    now = time.time()
    lines = log_lines(ctx.world, ctx.station, ctx.state, name, now)
    if since is not None:
        lines = [p for p in lines if p[0] >= since]  # inclusive, as moby's readers are
    first = lines if tail is None else (lines[-tail:] if tail > 0 else [])
    sys.stdout.write("".join(fmt(t, s) + "\n" for t, s in first))
    sys.stdout.flush()
    if not follow:
        return 0
    seen = len(lines)
    last_t = now
    while True:
        time.sleep(0.25)  # a real docker blocks on the log file; this only bounds the sim's CPU
        if ctx.orphaned():
            return 0
        now = time.time()
        state = ctx.state
        status = container_status(ctx.world, ctx.station, state, name, now)
        lines = log_lines(ctx.world, ctx.station, state, name, now)
        if since is not None:
            lines = [p for p in lines if p[0] >= since]  # inclusive, as moby's readers are
        new = [p for p in lines[seen:]] if len(lines) >= seen else [p for p in lines if p[0] > last_t]
        if new:
            sys.stdout.write("".join(fmt(t, s) + "\n" for t, s in new))
            sys.stdout.flush()
            last_t = new[-1][0]
        seen = len(lines)
        if status["state"] != "running":
            return 0


def cmd_events(args: list[str], ctx) -> int:
    fmt = None
    names: list[str] = []
    since_s = 0.0
    i = 0
    while i < len(args):
        if args[i] == "--since":
            since_s = go_duration_s(args[i + 1])
            i += 2
            continue
        if args[i] == "--filter":
            key, _, val = args[i + 1].partition("=")
            if key == "container":
                names.append(val)
            i += 2
            continue
        if args[i] == "--format":
            fmt = args[i + 1]
            i += 2
            continue
        i += 1
    watch = names or list(ctx.state["containers"])
    # --since: diff against the state that long ago, so a change inside the window is reported
    prev = {n: inspect_data(ctx, n, time.time() - since_s) for n in watch}
    first = since_s > 0
    while True:
        if not first:
            time.sleep(0.4)
        first = False
        if ctx.orphaned():
            return 0
        now = time.time()
        for n in watch:
            cur = inspect_data(ctx, n, now)
            old = prev.get(n)
            events = []
            if cur and old is None:
                events.append("create")
            if cur and old:
                was, is_ = old["State"]["Status"], cur["State"]["Status"]
                if was != "running" and is_ == "running":
                    events.append("start")
                elif was == "running" and is_ != "running":
                    events += ["kill", "die", "stop"] if cur["State"]["ExitCode"] == 0 else ["die"]
                elif is_ == "running" and old["State"]["StartedAt"] != cur["State"]["StartedAt"]:
                    events += ["die", "start"]
                elif old["State"]["StartedAt"] != cur["State"]["StartedAt"]:  # a whole run between two polls:
                    events += ["start", "die"]  # the daemon reported both as they happened
            if old and cur is None:
                events.append("destroy")
            for ev in events:
                data = {"Status": ev, "Action": ev, "Type": "container", "Time": int(now),
                        "Actor": {"ID": container_id(ctx.station, n), "Attributes": {"name": n}}}
                line = render(fmt, data) if fmt else f"{rfc3339(now)} container {ev} {data['Actor']['ID']} (name={n})"
                sys.stdout.write(line + "\n")
            if events:
                sys.stdout.flush()
            prev[n] = cur


def cmd_start(args: list[str], ctx) -> int:
    rc = 0
    for name in [a for a in args if not a.startswith("-")]:
        if name not in ctx.state["containers"] or ctx.state["containers"][name]["state"] == "absent":
            print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
            print(f"Error: failed to start containers: {name}", file=sys.stderr)
            rc = 1
            continue
        start_container(ctx.world, ctx.station, name)
        print(name)
    return rc


def _unkillable(ctx, name: str) -> bool:
    """The container-survives-stop fault: its process sits in the GPU driver (D state) and ignores
    SIGKILL, so the daemon gives up (moby's wording)."""
    if "container-survives-stop" not in ctx.faults:
        return False
    if container_status(ctx.world, ctx.station, ctx.state, name)["state"] != "running":
        return False
    time.sleep(0.5)  # a real daemon waits the stop timeout, then SIGKILL, then for the exit event
    print(f"Error response from daemon: cannot stop container: {name}: tried to kill container, but did not "
          "receive an exit event", file=sys.stderr)
    return True


def cmd_stop(args: list[str], ctx) -> int:
    names = []
    i = 0
    while i < len(args):
        if args[i] in ("-t", "--time", "-s", "--signal"):
            i += 2
            continue
        names.append(args[i])
        i += 1
    rc = 0
    for name in names:
        if name not in ctx.state["containers"] or ctx.state["containers"][name]["state"] == "absent":
            rc = _no_such(name)
            continue
        if _unkillable(ctx, name):
            rc = 1
            continue
        stop_container(ctx.world, ctx.station, name)
        print(name)
    return rc


def cmd_rm(args: list[str], ctx) -> int:
    force = "-f" in args or "--force" in args
    rc = 0
    for name in [a for a in args if not a.startswith("-")]:
        if name not in ctx.state["containers"] or ctx.state["containers"][name]["state"] == "absent":
            rc = _no_such(name)
            continue
        st = container_status(ctx.world, ctx.station, ctx.state, name)
        if st["state"] == "running" and not force:
            print(f"Error response from daemon: cannot remove container \"/{name}\": container is running: "
                  "stop the container before removing or force remove", file=sys.stderr)
            rc = 1
            continue
        if st["state"] == "running":
            if _unkillable(ctx, name):
                rc = 1
                continue
            stop_container(ctx.world, ctx.station, name)
        with ctx.world.edit(ctx.station) as s:
            s["containers"][name]["state"] = "absent"
            s["containers"][name]["runs"] = []
        print(name)
    return rc


def cmd_rename(args: list[str], ctx) -> int:
    if len(args) != 2:
        print('"docker rename" requires exactly 2 arguments.', file=sys.stderr)
        return 1
    old, new = args
    with ctx.world.edit(ctx.station) as s:
        c = s["containers"].get(old)
        if c is None or c["state"] == "absent":
            print(f"Error response from daemon: No such container: {old}", file=sys.stderr)
            return 1
        taken = s["containers"].get(new)
        if taken and taken["state"] != "absent":
            print(f'Error response from daemon: Conflict. The container name "/{new}" is already in use by '
                  f'container "{container_id(ctx.station, new)}". You have to remove (or rename) that container '
                  "to be able to reuse that name.", file=sys.stderr)
            return 1
        st = container_status(ctx.world, ctx.station, s, old, time.time())
        if st["state"] == "exited" and c["runs"] and c["runs"][-1].get("stopped_at") is None:
            # freeze how it ended: its timeline must not be recomputed against later peers
            c["runs"][-1]["stopped_at"] = st["finished_at"]
            c["runs"][-1]["exit_code"] = st.get("exit_code")
        s["containers"][new] = s["containers"].pop(old)
    return 0


_RUN_VALUE_FLAGS = {"--name", "-e", "--env", "-v", "--volume", "--device", "--ulimit", "--gpus", "--shm-size",
                    "--network", "--ipc", "--entrypoint", "-p", "--publish", "--env-file", "--restart",
                    "--runtime", "-w", "--workdir", "--cap-add", "--security-opt", "-u", "--user"}


def _images(ctx) -> dict[str, dict[str, str]]:
    """Local images: what the station's containers were created from, plus the profile's image."""
    pulled = ctx.state.get("pulled") or {}  # ref -> when this station pulled it (a moving tag's build)
    refs = {c["image"] for c in ctx.state["containers"].values()} | {ctx.profile.image} | set(pulled)
    out = {}
    for ref in refs:
        repo = ref.split("@")[0]
        repo = repo.rsplit(":", 1)[0] if ":" in repo.split("/")[-1] else repo
        build = ref.split("@")[0] + (f"@{pulled[ref]}" if pulled.get(ref) else "")
        image_id = "sha256:" + hashlib.sha256(build.encode()).hexdigest()
        out[ref] = {"id": image_id, "repo_digest": repo + "@sha256:" + hashlib.sha256(image_id.encode()).hexdigest()}
    return out


def _find_image(ctx, ref: str) -> dict[str, str] | None:
    for known, img in _images(ctx).items():
        if ref in (known, img["repo_digest"], img["id"]):
            return img
    return None


def cmd_image(args: list[str], ctx) -> int:
    """``docker image inspect [--format F] IMAGE``: Id and RepoDigests."""
    if not args or args[0] != "inspect":
        print(f"docker: 'image {args[0] if args else ''}' is not supported by the simulator", file=sys.stderr)
        return 1
    rest = args[1:]
    fmt, names, i = None, [], 0
    while i < len(rest):
        if rest[i] in ("--format", "-f"):
            fmt, i = rest[i + 1], i + 2
            continue
        names.append(rest[i])
        i += 1
    rc, out = 0, []
    for ref in names:
        img = _find_image(ctx, ref)
        if img is None:
            print(f"Error response from daemon: No such image: {ref}", file=sys.stderr)
            rc = 1
            continue
        data = {"Id": img["id"], "RepoTags": [ref] if "@" not in ref else [], "RepoDigests": [img["repo_digest"]],
                "Size": IMAGE_SIZE}
        out.append(render(fmt, data) if fmt else json.dumps([data], indent=4))
    if out:
        print("\n".join(out))
    return rc


def _env_from_client(args: list[str]) -> dict[str, str]:
    """``-e NAME`` without a value: docker copies NAME from its own environment (how secrets
    arrive). Recorded as sha256 of the value, so a test can see it arrived without storing it."""
    out = {}
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("-e", "--env") and "=" not in value and value in os.environ:
            out[value] = hashlib.sha256(os.environ[value].encode()).hexdigest()
    return out


def cmd_run(args: list[str], ctx) -> int:
    name = None
    gpus = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--name":
            name = args[i + 1]
        if a == "--gpus":
            gpus = args[i + 1]
        if a in _RUN_VALUE_FLAGS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        break
    image = args[i] if i < len(args) else None
    if image is None:
        print('"docker run" requires at least 1 argument.', file=sys.stderr)
        return 125
    name = name or "glm53"
    img = _find_image(ctx, image)
    if img is None:
        print(f"Unable to find image '{image}' locally", file=sys.stderr)
        print(f"docker: Error response from daemon: pull access denied for {image.split('@')[0].split(':')[0]}, "
              "repository does not exist or may require 'docker login'.", file=sys.stderr)
        return 125
    if gpus and gpus.strip('"').startswith("device="):
        have = {g["uuid"] for g in ctx.state["gpus"]} | {str(g["index"]) for g in ctx.state["gpus"]}
        for dev in gpus.strip('"')[len("device="):].split(","):
            if dev not in have:
                print("docker: Error response from daemon: failed to create task for container: failed to create "
                      "shim task: OCI runtime create failed: runc create failed: unable to start container process: "
                      "error during container init: error running prestart hook #0: exit status 1, stdout: , "
                      f"stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: device error: {dev}: "
                      "unknown device: unknown.", file=sys.stderr)
                return 125
    with ctx.world.edit(ctx.station) as s:
        c = s["containers"].get(name)
        if c and c["state"] != "absent":
            cid = container_id(ctx.station, name)
            print(f'docker: Error response from daemon: Conflict. The container name "/{name}" is already in use '
                  f'by container "{cid}". You have to remove (or rename) that container to be able to reuse that name.',
                  file=sys.stderr)
            return 125
        s["containers"][name] = {"state": "created", "image": image, "image_id": img["id"], "runs": [],
                                 "env_from_client": _env_from_client(args)}
    start_container(ctx.world, ctx.station, name, args=args)
    if "-d" in args or "--detach" in args:
        print(container_id(ctx.station, name))
    return 0


def cmd_top(args: list[str], ctx) -> int:
    """``docker top NAME [ps options]``: the engine's processes (host PIDs), ps-style columns."""
    from console.sim.workbench import engine_processes

    names = [a for a in args if not a.startswith("-") and a not in ("pid,args", "pid,comm,args")]
    name = names[0] if names else ""
    data = inspect_data(ctx, name, time.time()) if name else None
    if data is None:
        return _no_such(name)
    if data["State"]["Status"] != "running":
        print(f"Error response from daemon: container {data['Id']} is not running", file=sys.stderr)
        return 1
    print(f"{'PID':<20}COMMAND")
    for pid, cmd in engine_processes(ctx.world, ctx.station):
        print(f"{pid:<20}{cmd}")
    return 0


def cmd_info(args: list[str], ctx) -> int:
    """``docker info [--format F]``: runtimes include nvidia (the NVIDIA Container Toolkit)."""
    fmt = args[args.index("--format") + 1] if "--format" in args else None
    data = {"ServerVersion": "28.3.3", "Runtimes": {"io.containerd.runc.v2": {"path": "runc"},
                                                   "nvidia": {"path": "nvidia-container-runtime"},
                                                   "runc": {"path": "runc"}},
            "DefaultRuntime": "runc", "Name": ctx.state.get("hostname", ctx.station)}
    print(render(fmt, data) if fmt else f"Server Version: {data['ServerVersion']}\n Runtimes: "
          + " ".join(sorted(data["Runtimes"])))
    return 0


COMMANDS = {"inspect": cmd_inspect, "info": cmd_info, "container": None, "ps": cmd_ps, "logs": cmd_logs, "events": cmd_events,
            "start": cmd_start, "stop": cmd_stop, "rm": cmd_rm, "run": cmd_run, "image": cmd_image,
            "rename": cmd_rename, "top": cmd_top, "save": lambda a, c: cmd_save(a, c, _find_image),
            "load": lambda a, c: cmd_load(a, c, _find_image), "exec": lambda a, c: cmd_exec(a, c, inspect_data, _no_such)}


def main(argv: list[str], ctx) -> int:
    if not argv:
        print("Usage:  docker [OPTIONS] COMMAND", file=sys.stderr)
        return 1
    cmd, rest = argv[0], argv[1:]
    if cmd == "container" and rest:
        cmd, rest = rest[0], rest[1:]
    fn = COMMANDS.get(cmd)
    if fn is None:
        print(f"docker: '{cmd}' is not a docker command.\nSee 'docker --help'", file=sys.stderr)
        return 1
    return fn(rest, ctx)
