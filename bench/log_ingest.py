"""Log ingestion through the real app, headless: two stations offering lines at a fixed rate.

Batched path (what the console does): lines go through the station's ``LogStream.ingest`` and are posted
as one ``LogBatch`` per ~50 ms per station. Baseline measured in the same run: one message per
line. Reports delivered lines/s (lines that reached the Log widgets) and the p99 lag of a 10 ms
UI timer, median over ``--runs``, after ``--warmup`` seconds of load (the Log filling up to its
max_lines re-lays out the screen on every write; that transient is not the steady state).

Long-line case (``--long-rate``, default 10000 lines/s/station): the same stream with long lines
mixed in every second per station (10 x 1 KB, 2 x 100 KB, 1 x 1 MB: vLLM's argument lists, request
logs with whole prompts), against the same rate without them, measured in the same run: p99 and
max UI timer lag. And the cost of highlighting one line, the old quadratic error pattern vs the
current one (what a render pays per visible line).

Every run is printed (delivered lines/s, p99 and max lag), then the median, with the machine's load.
``--compare REF`` checks REF out in a temporary ``git worktree`` and runs it and this tree interleaved
(REF, this, this, REF, ...; each run its own process), so that the ratio this/REF comes from one
sitting on a shared machine (the load moves both alike).

    python bench/log_ingest.py [--seconds 4] [--runs 3] [--rates 10000,50000] [--long-rate 10000]
    python bench/log_ingest.py --compare 7d048de --runs 4 --rates 50000 --long-rate 0 --naive-runs 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reftree import interleaved, trees
from reftree import load as _load

from console.config import parse_config
from console.ui.app import ConsoleApp

try:
    from console.station.messages import LogBatch
    from console.station.monitor import StationService
except ImportError:  # an older tree (--compare with a release point before the station package)
    from console.messages import LogBatch  # type: ignore[no-redef]
    from console.monitor import StationService  # type: ignore[no-redef]

CONFIG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
[[stations]]
name = "A"
host = "127.0.0.1"
rank = 0
[[stations]]
name = "B"
host = "127.0.0.1"
rank = 1
"""
LINE = ("(Worker_TP1 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 385.9 tokens/s, Running: 16 reqs")


LONG_MIX = ((1_000, 10), (100_000, 2), (1_000_000, 1))  # (length, lines per second per station)


def long_line(length: int, n: int) -> str:
    """A long line that looks like one: an error word, then one long run of word characters."""
    head = f"(APIServer pid=1) INFO 12-01 07:17:09 [logger.py:39] Received request #{n}: prompt: 'RuntimeError"
    return head + "x" * max(0, length - len(head))


async def one_run(rate: int, seconds: float, mode: str, warmup: float = 1.0, long: bool = False,
                  stamps: bool = False) -> tuple[float, float, float]:
    cfg = parse_config(CONFIG, "bench.toml")
    app = ConsoleApp(cfg, start_services=False, clock=False)
    lags: list[float] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.2)
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            lags.append(max(0.0, now - last[0] - 0.01))
            last[0] = now

        app.set_interval(0.01, tick)
        services = {s.name: StationService(cfg, s, app.post_message) for s in cfg.stations}
        stop = asyncio.Event()

        async def producer(name: str) -> None:
            svc = _Ingest(services[name])
            start = time.perf_counter()
            sent = 0
            while not stop.is_set():
                due = int((time.perf_counter() - start) * rate)
                n = due - sent
                pre = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{time.time_ns() % 10**9:09d}Z " if stamps else ""
                if mode == "batched":
                    for i in range(n):
                        k = sent + i
                        if long:
                            for length, per_s in LONG_MIX:
                                if k % max(1, rate // per_s) == 0:
                                    svc.logs.ingest(long_line(length, k))
                        svc.logs.ingest(f"{pre}{LINE} #{k}")
                else:
                    for i in range(n):
                        app.post_message(LogBatch(name, [f"{LINE} #{sent + i}"]))
                sent = due
                await asyncio.sleep(0.005)

        async def flusher(name: str) -> None:
            logs = getattr(services[name], "logs", None)
            if logs is not None and hasattr(logs, "flush_every"):  # the tree's own flush policy
                await logs.flush_every()
            while not stop.is_set():
                await asyncio.sleep(0.05)
                _Ingest(services[name]).flush()

        tasks = [asyncio.create_task(producer(n)) for n in services]
        if mode == "batched":
            tasks += [asyncio.create_task(flusher(n)) for n in services]
        # Warm-up (not measured): the first frames' layout and the Log filling up to max_lines, where
        # every write changes its virtual height and Textual re-lays out the screen (40-150 ms each).
        await asyncio.sleep(warmup)
        t0 = time.perf_counter()
        lags.clear()
        delivered0 = sum(p.log_pane.total for p in app.panes.values())
        cpu0 = time.process_time()
        await asyncio.sleep(seconds)
        delivered = sum(p.log_pane.total for p in app.panes.values()) - delivered0
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        stop.set()
        for t in tasks:
            t.cancel()  # (the flushers: flush_every runs until cancelled)
        await asyncio.gather(*tasks, return_exceptions=True)
        # Fewer than 11 ticks of a 10 ms timer in the whole window: the producers starved the event loop
        # (the offered rate is past what one core ingests); no percentile means anything then.
        p99 = statistics.quantiles(lags, n=100)[98] if len(lags) > 10 else None
        worst = max(lags, default=None)
        app.exit()
    return delivered / elapsed, p99, worst, (cpu / delivered * 1e6 if delivered else None)


class _Ingest:
    """The station service's log intake, in this tree's words or an older one's (``--compare``)."""

    def __init__(self, svc) -> None:
        logs = getattr(svc, "logs", None)
        self.logs = self
        self.ingest = logs.ingest if logs is not None else svc._ingest
        self.flush = logs.flush if logs is not None else svc.flush_logs


def _ms(values) -> str:
    """The median lag in ms, or 'starved' when a run's UI timer hardly ticked (see one_run)."""
    vals = list(values)
    if any(v is None for v in vals):
        return "starved"
    return f"{statistics.median(vals) * 1000:.1f} ms"


def highlight_cost() -> None:
    """One line through the highlighter: the old ``\\w+(Error|Exception)`` vs the current pattern."""
    import re

    from console.station.log_buffer import DISPLAY_MAX_CHARS, display_line
    from console.ui.widgets.log_view import row_spans

    old = re.compile(r"\w+(Error|Exception)\b:?")
    print(f"\n{'line length':>12} {'old pattern':>12} {'current (whole line)':>21} {'shown (clipped)':>16}")
    for length in (2_000, 10_000, 20_000, 100_000, 1_000_000):
        line = long_line(length, 0)
        t0 = time.perf_counter()
        if length <= 20_000:  # the old pattern is quadratic: bounded to what finishes in seconds
            list(old.finditer(line))
        t_old = time.perf_counter() - t0 if length <= 20_000 else None
        t0 = time.perf_counter()
        row_spans(line)
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        row_spans(display_line(line))
        t_shown = time.perf_counter() - t0
        old_s = f"{t_old * 1000:9.1f} ms" if t_old is not None else "   (minutes)"
        print(f"{length:>12,} {old_s:>12} {t_new * 1000:18.2f} ms {t_shown * 1000:13.2f} ms")
    print(f"(lines are shown clipped to {DISPLAY_MAX_CHARS} characters with a marker before highlighting)")


def _run_line(label: str, res) -> str:
    rate, p99, worst, *more = res
    p = "starved" if p99 is None else f"{p99 * 1000:.1f} ms"
    w = "-" if worst is None else f"{worst * 1000:.1f} ms"
    cpu = f"  {more[0]:.2f} us CPU/line" if more and more[0] is not None else ""
    return f"    {label:>12} {rate:>12,.0f} lines/s  p99 {p:>9}  max {w:>9}{cpu}"


def _cases(args) -> list[tuple[str, int, str, bool]]:
    """(label, rate, mode, long lines) for every measurement the arguments ask for."""
    out = []
    for rate in [int(r) for r in args.rates.split(",")]:
        out.append((f"batched {rate:,}/stn", rate, "batched", False))
        if args.naive_runs:
            out.append((f"naive {rate:,}/stn", rate, "naive", False))
    if args.long_rate:
        out.append((f"short only {args.long_rate:,}/stn", args.long_rate, "batched", False))
        out.append((f"long mixed {args.long_rate:,}/stn", args.long_rate, "batched", True))
    return out


async def _measure(args, rate: int, mode: str, long: bool):
    if mode == "naive":
        return await one_run(rate, args.naive_seconds, mode, 0.0)
    return await one_run(rate, args.seconds, mode, args.warmup, long, args.stamps)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring (steady state)")
    ap.add_argument("--rates", default="10000,50000")
    ap.add_argument("--naive-seconds", type=float, default=1.0,
                    help="shorter: the baseline floods the message queue, which must drain before exit")
    ap.add_argument("--naive-runs", type=int, default=1)
    ap.add_argument("--long-rate", type=int, default=10000, help="lines/s/station for the long-line case (0: skip)")
    ap.add_argument("--stamps", action="store_true",
                    help="lines carry docker's timestamp prefix (as `docker logs --timestamps` prints them)")
    ap.add_argument("--compare", metavar="REF",
                    help="a git revision: built in a temporary worktree and run interleaved with this tree "
                         "(each run in its own process), so that a ratio comes from one sitting")
    ap.add_argument("--one", metavar="RATE:MODE:LONG", help=argparse.SUPPRESS)  # one run, JSON out (--compare)
    args = ap.parse_args()
    if args.one:
        rate, mode, long = args.one.split(":")
        print(json.dumps(await _measure(args, int(rate), mode, long == "1")))
        return
    if args.compare:
        compare(args)
        return
    print(f"{_load()}; each run: delivered lines/s (both stations), UI timer (10 ms) p99 and max lag")
    for label, rate, mode, long in _cases(args):
        runs = args.naive_runs if mode == "naive" else args.runs
        print(label, flush=True)
        res = []
        for i in range(runs):
            res.append(await _measure(args, rate, mode, long))
            print(_run_line(f"run {i + 1}", res[-1]), flush=True)
        print(f"  median {statistics.median(r[0] for r in res):,.0f} lines/s, p99 {_ms(r[1] for r in res)}, "
              f"max {_ms(r[2] for r in res)}", flush=True)
    print(_load())
    highlight_cost()


def compare(args) -> None:
    """REF and this tree, run after run in alternating order, every run in a fresh process with its
    tree first on the path: per-run figures, the medians, and the ratio this/REF of the median p99."""
    with trees(args.compare) as where:
        rev = next(iter(where))
        print(f"{_load()}; REF {args.compare} = {rev.removeprefix('ref ')} in {where[rev]}; runs interleaved, "
              "each its own process")
        summary = []
        for label, rate, mode, long in _cases(args):
            runs = args.naive_runs if mode == "naive" else args.runs
            print(label, flush=True)
            res: dict[str, list] = {k: [] for k in where}
            for i, name in interleaved(list(where), runs):
                res[name].append(_one_process(args, where[name], rate, mode, long))
                print(_run_line(f"{name} #{i + 1}", res[name][-1]) + f"  ({_load()})", flush=True)
            summary.append((label, res))
        print(f"\n{'case':24} " + " ".join(f"{k + ' p99':>16}" for k in where) + f" {'this/ref':>9}  ({_load()})")
        for label, res in summary:
            meds = [_median_p99(res[k]) for k in where]
            ratio = f"{meds[1] / meds[0]:.2f}" if None not in meds and meds[0] else "-"
            cpus = [statistics.median(c) if (c := [r[3] for r in res[k] if len(r) > 3 and r[3]]) else None
                    for k in where]
            print(f"{label:24} " + " ".join(f"{'starved' if m is None else f'{m * 1000:.1f} ms':>16}" for m in meds)
                  + f" {ratio:>9}  CPU/line " + " vs ".join("-" if c is None else f"{c:.2f} us" for c in cpus))


def _median_p99(res: list) -> float | None:
    vals = [r[1] for r in res]
    return None if not vals or None in vals else statistics.median(vals)


def _one_process(args, tree: Path, rate: int, mode: str, long: bool):
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", f"{rate}:{mode}:{int(long)}",
           "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--naive-seconds", str(args.naive_seconds),
           *(["--stamps"] if args.stamps else [])]
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=300)
    if out.returncode:
        raise SystemExit(f"log_ingest: the run in {tree} failed:\n{out.stderr[-2000:]}")
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    asyncio.run(main())
