"""``dgx-console status [--json]``: per station reachability, GPUs, memory, container, API."""

from __future__ import annotations

import argparse
import asyncio

from console import json_out
from console.commands.args import add_config_args
from console.config import load_config
from console.probes.engine_log import EngineProgress
from console.sanitize import one_line
from console.station.status import collect_status
from console.vocabulary import LOADING_PHASES, TRANSPORT_TEXT, EnginePhase, NcclTransport


def _fmt_mib(v) -> str:
    return "n/a" if v is None else f"{v / 1024:.1f}"


def add_replace_host_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replace-host-key", metavar="SHA256:...", default=None,
                   help="replace a CHANGED host key with the one the station offers now, named by its "
                        "fingerprint (read it on the station: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub); "
                        "removes the old known_hosts line(s)")


def image_line(container: dict) -> str | None:
    """The container's image as both names: the reference it was started from (a registry
    digest ``repo@sha256:...`` when pinned, else a tag) and the local image ID."""
    ref, image_id = container.get("image"), container.get("image_id")
    if not ref and not image_id:
        return None
    kind = "registry digest" if ref and "@sha256:" in ref else "tag"
    parts = [f"image {ref} ({kind})"] if ref else []
    if image_id:
        algo, _, hexes = image_id.partition(":")
        parts.append(f"image ID {algo}:{hexes[:12]}" if hexes else f"image ID {image_id}")
    return ", ".join(parts)


FATAL_SHOWN = 8  # the plain view's fatal lines (the state keeps at most as many)


def engine_words(eng: dict, with_fatal: bool = True) -> str:
    """The engine phase of ``status --json``'s ``engine`` in words (the dashboard's labels); with its
    first fatal line unless ``with_fatal`` is False (the plain view then lists every one below)."""
    p = EngineProgress(phase=eng["phase"], load_pct=eng["load_pct"], transport=eng["transport"], fatal=eng["fatal"])
    words = p.label
    if p.transport != NcclTransport.UNKNOWN:
        words += f", NCCL over {TRANSPORT_TEXT.get(p.transport, p.transport)}"
    if p.fatal and with_fatal:
        words += f": {one_line(p.fatal, 160)}"
    return words


def fatal_rows(eng: dict) -> list[str]:
    """The plain view's rows under ``engine:``: every fatal line of the failed run, one line each (at most
    ``FATAL_SHOWN``, each clipped with its mark), and how many more there were."""
    lines = eng.get("fatal_lines") or ([eng["fatal"]] if eng.get("fatal") else [])
    rows = [f"      fatal: {one_line(x, 160)}" for x in lines[:FATAL_SHOWN]]
    if len(lines) > FATAL_SHOWN:
        rows.append(f"      (+{len(lines) - FATAL_SHOWN} more fatal lines: dgx-console diagnose)")
    return rows


def api_down_words(api: dict, eng: dict | None, container: str | None = None) -> str:
    """Why the API does not answer, when the engine's state already says it: still loading is expected,
    a failed engine is the cause, a stopped one (its container does not run) too; else what the request
    got."""
    err = one_line(api.get("error") or "no answer")
    if eng and eng["phase"] == EnginePhase.STOPPED:
        where = f" (container {container})" if container else ""
        return f"not answering: the engine is stopped{where}; {err}"
    if eng and eng["phase"] in LOADING_PHASES:
        return f"not answering yet: the engine is still starting ({engine_words(eng)}); {err}"
    if eng and eng["phase"] == EnginePhase.FAILED:
        return f"not healthy: the engine failed at start-up (dgx-console diagnose); {err}"
    return f"not healthy ({err})"


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    data = asyncio.run(collect_status(config, trust=args.trust_host_key, replace=args.replace_host_key))
    if args.json:
        print(json_out.dumps(data, indent=2))
    else:
        for st in data["stations"]:
            mark = "up  " if st["reachable"] else "DOWN"
            print(f"{st['name']} (rank {st['rank']}) {mark} container {st['container']['name']}: "
                  f"{st['container']['state'] or '?'}")
            if line := image_line(st["container"]):
                print(f"    {line}")
            if st["error"]:
                print(f"    error: {one_line(st['error'])}")
            for g in st["gpus"]:
                if not g["name"]:
                    print(f"    GPU{g['index']} NO READING: {one_line(g['error'] or '?')}")
                    continue
                mem = f"{_fmt_mib(g['memory_used_mib'])}/{_fmt_mib(g['memory_total_mib'])} GiB"
                if g["memory_used_mib"] is None and "process_memory_mib" in g:
                    mem = f"{_fmt_mib(g['process_memory_mib'])} GiB in processes (unified memory)"
                print(f"    GPU{g['index']} {one_line(g['name'])}: {mem}, util {g['util_pct']}%, {g['temp_c']} C, "
                      f"{g['power_w']} W" + (f"  ERROR: {one_line(g['error'])}" if g["error"] else ""))
            if st["host_memory"]:
                hm = st["host_memory"]
                print(f"    host memory: {_fmt_mib(hm['total_mib'] - hm['available_mib'])}/"
                      f"{_fmt_mib(hm['total_mib'])} GiB used")
            eng = st.get("engine")
            if eng:
                rows = fatal_rows(eng)
                print(f"    engine: {engine_words(eng, with_fatal=not rows)}")
                for row in rows:
                    print(row)
            if st.get("progress"):
                alarm = st["progress"] in ("stuck", "wedged", "unknown")
                print(f"    progress: {st['progress'].upper() if alarm else st['progress']}"
                      + (f": {one_line(st['progress_why'])}" if alarm or st['progress'] == "progressing" else ""))
            api = st.get("api") or {}
            if api.get("url"):
                state = "healthy" if api["healthy"] else api_down_words(api, eng, st["container"]["state"])
                if api["healthy"] and api.get("error"):  # healthy, but the model list is not one
                    state += f"; {one_line(api['error'])}"
                print(f"    API {api['url']}: {state}" + (f", model {one_line(api['model'])}" if api.get("model") else ""))
    return 0 if all(st["reachable"] for st in data["stations"]) else 1


def register(sub) -> None:
    p = sub.add_parser("status", help="per station: reachable, GPUs + memory, container state, API health")
    add_config_args(p)
    add_replace_host_key(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
