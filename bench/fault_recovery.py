"""Time to detect and recover from faults, through the operator's eyes (``watch --json``).

Real OpenSSH sshd in network namespaces (the lab of tests/lab, needs root): station B suffers a
silent cut (its management veth goes down on the console's side: no FIN, no RST) and, separately,
a killed sshd (every process of its namespace killed, then sshd started again). Numbered log lines
are written on B throughout. Per fault, the median of ``--runs``:

- detect: fault -> B no longer ``live`` in watch (target <= 5 s)
- recover: repair -> B ``live`` again (target <= 5 s)
- lines lost / duplicated across the outage (target 0 / 0)
- the other station (A) during the outage: worst sample age, and whether it was ever not live
  (target: never stale)

and one source going wrong while the connection is fine:

- hung tool: B's ``nvidia-smi`` hangs ignoring hangup for ``--hang-s``: detect = B stale (by its GPU
  samples), recover = live again once the tool answers; then the stuck ``nvidia-smi`` processes left on B
  beyond the two live loops (target 0), lines lost/duplicated as above;
- crash between looks: B's container starts and dies (OOM, exit 1) between two looks: detect = the
  watching console shows it exited with the engine failed and its OOM line (target <= 5 s).

    flock /tmp/dgx-heavy.lock python bench/fault_recovery.py [--runs 3] [--cut-s 12] [--kill-s 3] [--hang-s 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lab"))
sys.path.insert(0, str(ROOT))

from lab import Lab, missing_prerequisites  # noqa: E402
from watching import Watch, measure_outage  # noqa: E402

from console.sim.engine import start_container, stop_container  # noqa: E402
from console.sim.world import hold_memory  # noqa: E402
from tests.sim.station_procs import station_procs  # noqa: E402

USUAL_SMI = 3  # B's nvidia-smi loops while all is well: the GPUs, their processes, the health rows


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def stuck_after_hang(lab: Lab, wait_s: float = 15.0) -> int:
    """nvidia-smi processes on B beyond its live loops, ``wait_s`` after the tool answers again."""
    deadline = time.time() + wait_s
    while True:
        extra = max(0, len(_alive(station_procs(lab.world, "B"))) - USUAL_SMI)
        if extra == 0 or time.time() > deadline:
            return extra
        time.sleep(0.5)


def crash_between_looks(lab: Lab) -> float:
    """Seconds from a container that started and died (OOM) since the last look to the watching
    console showing it exited, its engine failed and the OOM line."""
    stop_container(lab.world, "B")  # the outage cases left it running
    with lab.world.edit("B") as st:  # the oom fault's cause: a leftover process holding GPU memory
        hold_memory(lab.world.profile, st, 2)
    w = Watch(lab.config_path())
    try:
        w.first_state("B", ("live",), 0, 60)
        time.sleep(4)  # B's docker events have looked at least once
        t0 = time.time()
        start_container(lab.world, "B", at=time.time() - 60)
        got = w.wait(lambda: next((s for s in w.samples if s["station"] == "B" and s["t"] >= t0
                                   and s["container"]["state"] == "exited" and s["engine"]["phase"] == "failed"
                                   and s["container"]["exit_code"] == 1
                                   and "OutOfMemoryError" in (s["engine"]["fatal"] or "")),
                                  None), 30, "B exited (1) with its engine failed by the OOM")
        w.wait(lambda: True if any("OutOfMemoryError" in ln for ln in w.logs.get("B", [])) else None, 30,
               "B's OOM line in the watched log")
        return max(got["t"], time.time()) - t0  # both on screen (the line by the time it was seen)
    finally:
        w.stop()
        with lab.world.edit("B") as st:
            for g in st["gpus"]:
                g.pop("held_mib", None)
                g.pop("held_pid", None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cut-s", type=float, default=12.0, help="how long the cut lasts (past the 6 s dead limit)")
    ap.add_argument("--kill-s", type=float, default=3.0, help="how long sshd stays dead")
    ap.add_argument("--hang-s", type=float, default=10.0, help="how long nvidia-smi hangs")
    ap.add_argument("--cases", default="cut,kill,hang,crash", help="which cases, comma-separated")
    args = ap.parse_args()
    missing = missing_prerequisites()
    if missing:
        print("fault_recovery needs: " + ", ".join(missing), file=sys.stderr)
        return 2
    lab = Lab().setup()
    try:
        cases = set(args.cases.split(","))
        faults = {name: f for key, name, f in (
            ("cut", "silent cut", (lambda: lab.cut("B"), lambda: lab.restore("B"), args.cut_s)),
            ("kill", "sshd killed", (lambda: lab.kill_sshd("B"), lambda: lab.start_sshd("B"), args.kill_s)),
            ("hang", "hung tool", (lambda: lab.set_faults("B", ["smi-hang"]), lambda: lab.set_faults("B", []),
                                   args.hang_s)),
        ) if key in cases}
        print(f"{'fault':12} {'detect s':>9} {'recover s':>10} {'lost':>5} {'dup':>4} {'A worst age s':>14} "
              f"{'A not live':>11}  (median of {args.runs}; each run's detect/recover in brackets)")
        stuck: list[int] = []
        for name, (fault, repair, settle) in faults.items():
            runs = []
            for _ in range(args.runs):
                runs.append(measure_outage(lab, fault, repair, settle))
                if name == "hung tool":
                    stuck.append(stuck_after_hang(lab))
            med = {k: statistics.median(r[k] for r in runs) for k in ("detect_s", "recover_s", "lost", "dup")}
            ages = [max((s["sample_age_s"] or 0.0) for s in r["a_during"]) for r in runs]
            not_live = sum(1 for r in runs for s in r["a_during"] if s["state"] != "live")
            each = ", ".join(f"{r['detect_s']:.1f}/{r['recover_s']:.1f}" for r in runs)
            print(f"{name:12} {med['detect_s']:>9.2f} {med['recover_s']:>10.2f} {med['lost']:>5.0f} {med['dup']:>4.0f} "
                  f"{statistics.median(ages):>14.2f} {not_live:>11}  [{each}]", flush=True)
            print(f"{'':12} first state seen: {', '.join(sorted({r['down']['state'] for r in runs}))}; "
                  f"lines written per run: {', '.join(str(r['written']) for r in runs)}")
            if name == "hung tool":
                print(f"{'':12} stuck nvidia-smi left on B per run (beyond its {USUAL_SMI} loops): {stuck}")
        if "crash" in cases:
            crash = [crash_between_looks(lab) for _ in range(args.runs)]
            print(f"{'crash':12} {statistics.median(crash):>9.2f} {'-':>10}  (container started and died between "
                  f"two looks -> shown exited, engine failed, OOM line; runs: "
                  f"{', '.join(f'{c:.1f}' for c in crash)})")
    finally:
        lab.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
