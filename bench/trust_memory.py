"""Peak memory of the hostile one-shot outputs against their caps: each case runs in a child process
(its own peak RSS), through the real code (the local transport's bounded read, the hang capture's
parsers, the rails tracker, the flight recorder's reader), and prints its figures.

    PYTHONPATH=$PWD python3 bench/trust_memory.py

Cases: ``idle`` (the console's modules imported: the floor), ``kernel-400mb`` (a kernel-log read that
prints 400 MB, through LocalTransport.run and the capture's kernel parse), ``pyspy-400mb`` (py-spy
printing 400 MB of frames, read and parsed as the capture does), ``carrier-1e8`` (a carrier_changes
jump of 1e8 between two rails reads), ``fr-dag`` (a 554-byte flight recorder dump that shares
objects through the pickle memo). Not a test: a measurement the report quotes."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

CASES = ("idle", "kernel-400mb", "pyspy-400mb", "carrier-1e8", "fr-dag")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(name: str) -> dict:
    import asyncio

    from console.config import Station
    from console.doctor import evidence
    from console.doctor.evidence import StationEvidence
    from console.remote.local import LocalTransport

    out: dict = {"case": name}
    t0 = time.monotonic()
    st = Station(name="A", host="127.0.0.1", rank=0)
    if name in ("kernel-400mb", "pyspy-400mb"):
        line = ("2026-12-06T01:00:00+00:00 host kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off\n"
                if name == "kernel-400mb" else "    all_reduce (vllm/distributed/device_communicators/pynccl.py:134)\n")
        n = 400 * 1024 * 1024 // len(line)
        cmd = f"yes {line.strip()!r} | head -n {n}"
        if name == "pyspy-400mb":
            cmd = f"printf 'Process 2757: VLLM::Worker_TP1\\nThread 0x1 (active): \"MainThread\"\\n'; {cmd}"
        res = asyncio.run(LocalTransport(st, 120.0).run(cmd))
        out.update(read_bytes=len(res.stdout), cut=bool(getattr(res, "cut", False)))
        ev = StationEvidence("A")
        if name == "kernel-400mb":
            evidence._kernel(ev, res.stdout, 0.0)
            out["events_kept"] = len(ev.kernel["events"])
        else:
            evidence._pyspy(ev, res.stdout)
            out["processes"] = len(ev.pyspy.get("processes", []))
    elif name == "carrier-1e8":
        from console.probes.rails import RailReading
        from console.station.rails_live import RailTracker

        tr = RailTracker()
        tr.feed({"eth0": RailReading("eth0", "up", True, 400000, 9000, 10)}, 1000.0)
        views = tr.feed({"eth0": RailReading("eth0", "up", True, 400000, 9000, 10 + 10**8)}, 1002.0)
        out["flaps_counted"] = views["eth0"].flaps
    elif name == "fr-dag":
        from console.probes import ParseError
        from console.probes import flight_recorder as fr

        ops = bytearray(b"\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01X\x03\x00\x00\x002.4q\x02X\x07\x00\x00\x00"
                        b"entriesq\x03]q\x04}q\x05X\x02\x00\x00\x00pgq\x06}q\x07)")
        ops += b"q\x08h\x08\x86" * 95 + b"K\x01s" + b"sas."
        out["dump_bytes"] = len(ops)
        try:
            fr.parse_dump(bytes(ops))
            out["result"] = "read"
        except ParseError as exc:
            out["result"] = f"refused: {str(exc)[:60]}"
    out.update(wall_s=round(time.monotonic() - t0, 2), peak_rss_mb=round(_rss_mb(), 1))
    return out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--case":
        print(json.dumps(run_case(sys.argv[2])))
        return 0
    for name in CASES:
        p = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True, text=True, timeout=600)
        print(p.stdout.strip() or f'{{"case": "{name}", "error": {json.dumps(p.stderr.strip()[-300:])}}}')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
