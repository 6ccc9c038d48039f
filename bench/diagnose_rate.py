"""How many log lines per second the diagnosis catalogue sustains on one core.

Feeds a realistic healthy stream (the healthy fixtures: vLLM/SGLang startup, NCCL INFO, periodic
throughput and MTP stats lines, docker timestamps, some ANSI colour) plus a sprinkling of fault
lines, in batches like the station services use. Prints every run and the median.

``--compare REF`` checks REF out in a temporary ``git worktree`` and runs both trees interleaved, each run
its own process fed this tree's corpus (so only the diagnoser differs): the ratio this/REF comes from one
sitting.

    python bench/diagnose_rate.py [--lines 400000] [--batch 2000] [--runs 5] [--compare 7d048de]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from highlight_compare import per_char
from reftree import interleaved, load, trees

try:
    from console.catalogue import HIGHLIGHTS
    from console.catalogue.classify import classify
    from console.diagnosis import Diagnoser
except ImportError:  # an older tree (--compare with a release point before the catalogue package)
    from console.diagnose import Diagnoser  # type: ignore[no-redef]
    from console.diagnosis.catalogue import HIGHLIGHTS  # type: ignore[no-redef]
    classify = None
from console.probes.engine_log import EngineLogTracker

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"

EXTRA_HEALTHY = [
    "(APIServer pid=1) INFO 11-30 14:05:21 [loggers.py:123] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
    "Avg generation throughput: 98.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, "
    "Prefix cache hit rate: 41.0%",
    "(APIServer pid=1) INFO 11-30 14:05:21 [metrics.py:88] SpecDecoding metrics: Mean acceptance length: 2.61, "
    "Accepted throughput: 60.12 tokens/s, Drafted throughput: 92.40 tokens/s, Accepted: 601 tokens, "
    "Drafted: 924 tokens, Per-position acceptance rate: 0.812, 0.554, 0.301, Avg Draft acceptance rate: 65.0%",
    "(APIServer pid=1) INFO:     192.168.100.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "spark-a:2981:2981 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'",
    "station-a:391:512 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    "\x1b[0;36m(Worker_TP0 pid=391)\x1b[0;0m INFO 11-30 14:05:22 [gpu_worker.py:301] Available KV cache memory: 18.40 GiB",
]
FAULTS = [
    "station-b:77:90 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.100.2<0>",
    "[rank0]:[E1130 14:06:00.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 "
    "milliseconds before timing out.",
]


def corpus() -> list[str]:
    lines: list[str] = []
    for p in sorted(FIXTURES.glob("healthy*.log")):
        lines += [x for x in p.read_text().splitlines() if not x.startswith(("# source:", "# note:"))]
    lines += EXTRA_HEALTHY * 3
    return [f"2026-11-30T14:05:{i % 60:02d}.{i:09d}Z {x}" for i, x in enumerate(lines)]


def run_once(stream: list[str], batch: int) -> tuple[float, float]:
    """(lines per CPU second of this process, lines per wall second)."""
    d = Diagnoser()
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(stream), batch):
        d.feed("station-a", stream[i:i + batch])
    return len(stream) / (time.process_time() - c0), len(stream) / (time.perf_counter() - t0)


def run_station_once(stream: list[str], batch: int) -> float:
    """Lines per CPU second of a station's whole log reading: the diagnosis and the start-up tracker
    (phase, transport, timeline) on every batch. This tree classifies a batch once for both; an older
    tree scanned it once for each (so ``--compare`` weighs the same work)."""
    d, tracker = Diagnoser(), EngineLogTracker()
    c0 = time.process_time()
    for i in range(0, len(stream), batch):
        chunk = stream[i:i + batch]
        if classify is None:
            tracker.feed_batch(chunk)
            d.feed("station-a", chunk)
        else:
            b = classify(chunk)
            tracker.feed_classified(b)
            d.feed("station-a", chunk, b)
    return len(stream) / (time.process_time() - c0)


def highlight_ns_per_char() -> dict[int, float]:
    """Log highlighting (the pane highlights every visible line): time per character must not grow with
    the line (a backtracking pattern would make a long line quadratic)."""
    return {n: per_char(HIGHLIGHTS, n) for n in (20_000, 320_000)}


def stream_of(lines: int) -> list[str]:
    base = corpus()
    stream = (base * (lines // len(base) + 1))[:lines]
    for k in range(0, len(stream), 50_000):  # one fault line per 50k lines
        stream[k] = FAULTS[(k // 50_000) % len(FAULTS)]
    return stream


def one(args) -> dict:
    """One run in this process: lines per CPU-s and wall-s, and the highlight's ns/char."""
    stream = stream_of(args.lines)
    cpu, wall = run_once(stream, args.batch)
    ns = highlight_ns_per_char()
    return {"cpu": cpu, "wall": wall, "station": run_station_once(stream, args.batch), "ns20k": ns[20_000],
            "ns320k": ns[320_000]}


def run_line(name: str, r: dict) -> str:
    return (f"  {name:>14}: diagnosis {r['cpu']:>9,.0f} lines/CPU-s ({r['wall']:>9,.0f}/wall-s), diagnosis + "
            f"start-up tracker {r['station']:>9,.0f} lines/CPU-s, highlight "
            f"{r['ns20k']:.0f} ns/char at 20k, {r['ns320k']:.0f} at 320k")


def compare(args) -> None:
    """Every run its own process with its tree first on the path; this tree's corpus for both."""
    with trees(args.compare) as where:
        print(f"diagnose feed: {args.lines} lines, batch {args.batch}, {args.runs} runs per tree, interleaved; "
              f"{load()}")
        res: dict[str, list[dict]] = {k: [] for k in where}
        for i, name in interleaved(list(where), args.runs):
            env = {**os.environ, "PYTHONPATH": str(where[name])}
            out = subprocess.run([sys.executable, __file__, "--one", "--lines", str(args.lines), "--batch",
                                  str(args.batch)], env=env, capture_output=True, text=True, check=True).stdout
            res[name].append(json.loads(out))
            print(run_line(f"{name} #{i + 1}", res[name][-1]) + f"  ({load()})", flush=True)
        print("medians:")
        med = {k: {f: statistics.median(r[f] for r in v) for f in ("cpu", "wall", "station", "ns20k", "ns320k")}
               for k, v in res.items()}
        for k, m in med.items():
            print(run_line(k, m))
        if len(med) == 2:
            ref, this = med.values()
            print(f"  this/ref: diagnosis lines/CPU-s {this['cpu'] / ref['cpu']:.2f}, diagnosis + tracker "
                  f"{this['station'] / ref['station']:.2f} (higher is faster), highlight ns/char "
                  f"{this['ns20k'] / ref['ns20k']:.2f} (lower is faster); {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--compare", metavar="REF", help="a git revision, run interleaved with this tree")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one run, JSON out (--compare)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    if args.compare:
        compare(args)
        return
    stream = stream_of(args.lines)
    runs = [run_once(stream, args.batch) for _ in range(args.runs)]
    cpu = [r[0] for r in runs]
    wall = [r[1] for r in runs]
    print(f"diagnose feed: {args.lines} lines, batch {args.batch}, {args.runs} runs; {load()}")
    print("runs (lines per CPU-second): " + ", ".join(f"{c:,.0f}" for c in cpu))
    print(f"median {statistics.median(cpu):,.0f} lines per CPU-second (one core; min {min(cpu):,.0f}, "
          f"max {max(cpu):,.0f})")
    print(f"median {statistics.median(wall):,.0f} lines per wall-second (shared machine)")
    station = [run_station_once(stream, args.batch) for _ in range(args.runs)]
    print(f"diagnosis + start-up tracker (a station's whole log reading): median {statistics.median(station):,.0f} "
          "lines per CPU-second")
    per_char = highlight_ns_per_char()
    print(f"highlight: {per_char[20_000]:.0f} ns/char at 20k chars, {per_char[320_000]:.0f} ns/char at "
          f"320k (ratio {per_char[320_000] / per_char[20_000]:.2f}; ~1 = linear, 16 = quadratic)")


if __name__ == "__main__":
    main()
