"""``dgx-console demo``: the dashboard against built-in simulated stations (no hardware).

The simulator runs as a child process (``dgx-console sim --running``) so the UI's event loop
does not share a core with the simulated stations' SSH server; it is stopped when the UI exits.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from console.commands._tui import check_theme, load_for_tui, run_app
from console.commands.args import UsageError
from console.commands.sim import add_sim_args, check_sim_args
from console.sim.world import KNOWN_FAULTS

START_TIMEOUT_S = 30


def start_sim_process(args: argparse.Namespace, workdir: Path, running: bool = True,
                      while_starting: Callable[[], object] | None = None) -> tuple[subprocess.Popen, Path]:
    """Start the simulator and wait until its stations answer. ``while_starting`` runs meanwhile
    (the demo imports the TUI then: the two take about as long, on two cores at once)."""
    cfg = workdir / "demo.toml"
    ready = workdir / "ready"
    cmd = [sys.executable, "-m", "console", "sim", "--write-config", str(cfg), "--root", str(workdir / "world"),
           "--ready-file", str(ready), "--stations", str(args.stations), "--profile", args.profile,
           "--time-scale", str(args.time_scale)]
    if running:
        cmd.append("--running")
    for f in args.fault:
        cmd += ["--fault", f]
    if args.api_key:
        cmd += ["--api-key", args.api_key]
    log = open(workdir / "sim.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:  # whatever ends the wait (a failure, the deadline, SIGTERM's SystemExit) stops the simulator
        if while_starting is not None:
            while_starting()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            if proc.poll() is not None:
                msg = (workdir / "sim.log").read_text().strip().splitlines()
                raise UsageError(f"simulator failed to start: {msg[-1] if msg else 'exit ' + str(proc.returncode)}")
            if time.monotonic() > deadline:
                raise UsageError(f"simulator did not start within {START_TIMEOUT_S} s (log: {workdir / 'sim.log'})")
            time.sleep(0.05)
    except BaseException:
        stop_sim_process(proc)
        raise
    return proc, cfg


def import_tui() -> None:
    """Import the TUI (~0.4 s) while the simulator starts, instead of after it."""
    importlib.import_module("console.ui.app")


def stop_sim_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run(args: argparse.Namespace) -> int:
    for f in args.fault:
        if f.partition("@")[0] not in KNOWN_FAULTS:
            raise UsageError(f"--fault: unknown fault {f!r} (known: {', '.join(sorted(KNOWN_FAULTS))})")
    check_sim_args(args)
    check_theme(args.theme)
    # SIGTERM (kill) and SIGHUP (the terminal closed) unwind like Ctrl+C would: the simulator (its own
    # session) is stopped and the temporary directory removed, instead of both outliving the demo.
    previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with tempfile.TemporaryDirectory(prefix="dgx-demo-") as tmp:
            proc, cfg = start_sim_process(args, Path(tmp), while_starting=import_tui)
            try:
                # before the TUI takes the screen, and still above it once it leaves: the headless
                # commands (status, doctor, watch, check ...) work against the demo with this --config
                print(f"demo: config {cfg} (while the demo runs, try: dgx-console status --config {cfg})",
                      file=sys.stderr, flush=True)
                return run_app(load_for_tui(str(cfg)), args)
            finally:
                stop_sim_process(proc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def register(sub) -> None:
    p = sub.add_parser("demo", help="the console against built-in simulated stations (no hardware needed)")
    add_sim_args(p)
    p.set_defaults(func=run)
