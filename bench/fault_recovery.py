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

    flock /tmp/dgx-heavy.lock python bench/fault_recovery.py [--runs 3] [--cut-s 12] [--kill-s 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lab"))

from lab import Lab, missing_prerequisites  # noqa: E402
from watching import measure_outage  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cut-s", type=float, default=12.0, help="how long the cut lasts (past the 6 s dead limit)")
    ap.add_argument("--kill-s", type=float, default=3.0, help="how long sshd stays dead")
    args = ap.parse_args()
    missing = missing_prerequisites()
    if missing:
        print("fault_recovery needs: " + ", ".join(missing), file=sys.stderr)
        return 2
    lab = Lab().setup()
    try:
        faults = {
            "silent cut": (lambda: lab.cut("B"), lambda: lab.restore("B"), args.cut_s),
            "sshd killed": (lambda: lab.kill_sshd("B"), lambda: lab.start_sshd("B"), args.kill_s),
        }
        print(f"{'fault':12} {'detect s':>9} {'recover s':>10} {'lost':>5} {'dup':>4} {'A worst age s':>14} "
              f"{'A not live':>11}  (median of {args.runs}; each run's detect/recover in brackets)")
        for name, (fault, repair, settle) in faults.items():
            runs = [measure_outage(lab, fault, repair, settle) for _ in range(args.runs)]
            med = {k: statistics.median(r[k] for r in runs) for k in ("detect_s", "recover_s", "lost", "dup")}
            ages = [max((s["sample_age_s"] or 0.0) for s in r["a_during"]) for r in runs]
            not_live = sum(1 for r in runs for s in r["a_during"] if s["state"] != "live")
            each = ", ".join(f"{r['detect_s']:.1f}/{r['recover_s']:.1f}" for r in runs)
            print(f"{name:12} {med['detect_s']:>9.2f} {med['recover_s']:>10.2f} {med['lost']:>5.0f} {med['dup']:>4.0f} "
                  f"{statistics.median(ages):>14.2f} {not_live:>11}  [{each}]", flush=True)
            print(f"{'':12} first state seen: {', '.join(sorted({r['down']['state'] for r in runs}))}; "
                  f"lines written per run: {', '.join(str(r['written']) for r in runs)}")
    finally:
        lab.teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
