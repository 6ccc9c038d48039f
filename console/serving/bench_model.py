"""A benchmark sweep as data: its settings, one record per request, one result per concurrency level
(AIPerf's definitions: see ``console/serving/bench.py``), the comparison with NVIDIA's published
table, the warnings the figures call for, and the report with its JSON and CSV forms. Pure apart from
``save_report``.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from console.safe_files import FileProblem, expand, prepare_target, write_replacing
from console.serving.bench_stats import CI_METHOD, Slo, level_tail, percentile, slo_answer
from console.serving.metrics import MetricsSample

DEFAULT_CONCURRENCY = (1, 8, 16, 32)
DEFAULT_MAX_TOKENS = 8192  # NVIDIA's output cap
WARMUP_FACTOR = 3
MEASURED_FACTOR = 10
PROGRESS_S = 1.0  # live progress between request completions
#: A reply is timed for per-user tok/s (1/ITL) only with at least this many tokens, over at least
#: MIN_DECODE_S between its first and last token chunk: a 9-token reply that arrives in one burst
#: would "decode" at 18,000 tok/s, which is the network, not the engine.
MIN_TIMED_TOKENS = 16
MIN_DECODE_S = 0.01


@dataclass(frozen=True)
class BenchSettings:
    """One sweep. ``None`` counts follow NVIDIA's method (3x and 10x the concurrency)."""

    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests_per_level: int | None = None
    warmup: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    effort: str | None = None
    ignore_eos: bool = False
    settle_s: float = 3.0  # how long to wait for the server's token counter to catch up
    watch_s: float = 0.5  # how often /metrics is read for running/waiting during a level
    depths: tuple[int, ...] = (0,)  # prompt depths: tokens of context before each prompt (warm-up too)
    slo: Slo | None = None
    decode_floor_tokens: int = MIN_TIMED_TOKENS  # 0: every reply of 2+ tokens gives per-user tok/s

    def __post_init__(self) -> None:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency levels must be positive integers")
        if self.requests_per_level is not None and self.requests_per_level < 1:
            raise ValueError("requests per level must be at least 1")
        if self.warmup is not None and self.warmup < 0:
            raise ValueError("warm-up requests cannot be negative")
        if self.max_tokens < 1:
            raise ValueError("max tokens must be at least 1")
        if not self.depths or any(d < 0 for d in self.depths):
            raise ValueError("prompt depths must be 0 or more tokens")
        if self.decode_floor_tokens < 0:
            raise ValueError("the decode floor cannot be negative")

    def measured_for(self, c: int) -> int:
        return self.requests_per_level if self.requests_per_level is not None else MEASURED_FACTOR * c

    def warmup_for(self, c: int) -> int:
        return self.warmup if self.warmup is not None else WARMUP_FACTOR * c


@dataclass(frozen=True)
class RequestRecord:
    """One measured request. Times are ``time.perf_counter()`` seconds; ``end`` is the last
    response (the stream's end, usage chunk included)."""

    start: float
    end: float
    ttft_s: float | None
    latency_s: float | None
    output_tokens: int | None
    chunks: int = 0
    error: str | None = None
    input_tokens: int | None = None  # usage.prompt_tokens (the depth's context included)

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None and self.output_tokens is not None

    @property
    def itl_s(self) -> float | None:
        """AIPerf's inter-token latency: (latency - TTFT) / (OSL - 1)."""
        if not self.ok or self.latency_s is None or (self.output_tokens or 0) < 2:
            return None
        decode = self.latency_s - (self.ttft_s or 0.0)
        return decode / (self.output_tokens - 1) if decode > 0 else None  # type: ignore[operator]

    @property
    def timed(self) -> bool:
        """Long enough to time decoding (see MIN_TIMED_TOKENS): only these give per-user tok/s."""
        return self.timed_at(MIN_TIMED_TOKENS)

    def timed_at(self, floor_tokens: int) -> bool:
        """``timed`` with the sweep's own decode floor; a floor of 0 drops no reply (nor MIN_DECODE_S)."""
        if self.itl_s is None:
            return False
        if floor_tokens <= 0:
            return True
        if (self.output_tokens or 0) < floor_tokens:
            return False
        return (self.latency_s or 0.0) - (self.ttft_s or 0.0) >= MIN_DECODE_S


def peak_in_flight(records: Sequence[RequestRecord]) -> int:
    """The most requests that were in flight at once (a sweep over start/end times): a level of
    C4 with 2 requests never has more than 2."""
    events = sorted([(r.start, 1) for r in records] + [(r.end, -1) for r in records],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass(frozen=True)
class LevelResult:
    """One concurrency level; field names are the ``bench --json`` contract (plus extras)."""

    concurrency: int
    requests: int  # measured requests sent
    output_tokens: int  # sum of usage.completion_tokens over successful requests
    total_tok_s: float | None
    per_user_tok_s: float | None
    ttft_ms_mean: float | None
    itl_ms_mean: float | None
    latency_s_mean: float | None
    errors: int
    duration_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    latency_s_p50: float | None = None
    latency_s_p99: float | None = None
    tokens_per_chunk: float | None = None  # > 1 with MTP: one chunk carries several tokens
    server_tokens: int | None = None  # generation-token counter delta from /metrics
    mismatch: bool = False  # server_tokens known and different from output_tokens
    server_running_max: int | None = None  # peak requests the server ran at once while measured
    server_waiting_max: int | None = None  # peak requests it kept waiting (its queue)
    error_samples: tuple[str, ...] = ()
    concurrency_reached: int | None = None  # most requests in flight at once (<= concurrency)
    timed_requests: int = 0  # replies long enough to give per-user tok/s (see MIN_TIMED_TOKENS)
    median_output_tokens: float | None = None
    depth: int = 0  # tokens of context before each prompt
    ttft_ms_p90: float | None = None
    itl_ms_p90: float | None = None
    latency_s_p90: float | None = None
    ci95: dict[str, list[float | None]] = field(default_factory=dict)  # "ttft_ms_p99": [lo, hi] (bench_stats)
    goodput_pct: float | None = None  # share of measured requests meeting the SLO (None: no SLO given)
    goodput_req_s: float | None = None
    slo_met: int | None = None
    input_tokens_mean: float | None = None
    spec_drafts: int | None = None  # speculative-decoding drafts the server counted while measured
    spec_accept_length: float | None = None  # 1 + accepted / drafts over the level
    decode_floor_tokens: int = MIN_TIMED_TOKENS

    @property
    def reached(self) -> bool:
        """The level had ``concurrency`` requests in flight at some point."""
        return self.concurrency_reached is None or self.concurrency_reached >= self.concurrency

    @property
    def label(self) -> str:
        """``C4``, or ``C4 (2 in flight)`` when fewer were ever in flight."""
        if self.reached:
            return f"C{self.concurrency}"
        return f"C{self.concurrency} ({self.concurrency_reached} in flight)"

    def notes(self) -> list[str]:
        """What makes this level's figures less than they look (one line each)."""
        out = []
        if not self.reached:
            out.append(f"C{self.concurrency}: at most {self.concurrency_reached} request"
                       f"{'s' if self.concurrency_reached != 1 else ''} in flight "
                       f"({self.requests} measured), so this level is not C{self.concurrency}: "
                       f"measure at least {self.concurrency} requests (NVIDIA: {MEASURED_FACTOR}x)")
        ok = self.requests - self.errors
        if ok and self.timed_requests < ok:
            median = f"median {self.median_output_tokens:,.0f} tokens" if self.median_output_tokens is not None else ""
            what = "no reply was" if not self.timed_requests else f"{ok - self.timed_requests} of {ok} replies were not"
            out.append(f"C{self.concurrency}: per-user tok/s " + ("not measured: " if not self.timed_requests
                                                                  else "from the longer replies only: ")
                       + f"{what} long enough to time decoding ({median}; the decode floor: "
                       f"{self.decode_floor_tokens}+ tokens over {MIN_DECODE_S * 1000:.0f}+ ms, "
                       "--decode-floor 0 times every reply)")
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_samples"] = list(self.error_samples)
        d["notes"] = self.notes()
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 4)
        d["ci95"] = {k: [None if x is None else round(x, 4) for x in v] for k, v in self.ci95.items()}
        return d


def summarize(concurrency: int, records: Sequence[RequestRecord], server_tokens: int | None = None,
              server_peaks: dict[str, float] | None = None, *, depth: int = 0, slo: Slo | None = None,
              decode_floor_tokens: int = MIN_TIMED_TOKENS, spec: tuple[int, int] | None = None) -> LevelResult:
    """Per-level figures from measured requests, with AIPerf's definitions (pure); ``spec``: the
    server's (drafts, accepted tokens) deltas over the level."""
    peaks = server_peaks or {}
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    duration = None
    if ok:
        duration = max(r.end for r in ok) - min(r.start for r in records)
    ttfts = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    itls = [r.itl_s for r in ok if r.timed_at(decode_floor_tokens) and r.itl_s is not None]
    lats = [r.latency_s for r in ok if r.latency_s is not None]
    chunks = sum(r.chunks for r in ok)
    errors = [r.error or "no usage in the reply (stream_options.include_usage unsupported?)"
              for r in records if not r.ok]
    return LevelResult(
        concurrency=concurrency,
        requests=len(records),
        output_tokens=tokens,
        total_tok_s=tokens / duration if duration and duration > 0 else None,
        per_user_tok_s=_mean([1.0 / x for x in itls]),
        ttft_ms_mean=_mean(ttfts),
        itl_ms_mean=None if not itls else statistics.fmean(itls) * 1000,
        latency_s_mean=_mean(lats),
        errors=len(errors),
        duration_s=duration,
        ttft_ms_p50=percentile(ttfts, 50),
        ttft_ms_p99=percentile(ttfts, 99),
        itl_ms_p50=None if not itls else percentile(itls, 50) * 1000,  # type: ignore[operator]
        itl_ms_p99=None if not itls else percentile(itls, 99) * 1000,  # type: ignore[operator]
        latency_s_p50=percentile(lats, 50),
        latency_s_p99=percentile(lats, 99),
        tokens_per_chunk=tokens / chunks if chunks else None,
        server_tokens=server_tokens,
        mismatch=server_tokens is not None and server_tokens != tokens,
        server_running_max=int(peaks["running"]) if "running" in peaks else None,
        server_waiting_max=int(peaks["waiting"]) if "waiting" in peaks else None,
        error_samples=tuple(dict.fromkeys(errors))[:3],
        concurrency_reached=peak_in_flight(records) if records else None,
        timed_requests=len(itls),
        median_output_tokens=percentile([float(r.output_tokens or 0) for r in ok], 50),
        depth=depth,
        decode_floor_tokens=decode_floor_tokens,
        **level_tail(records, ttfts, [x * 1000 for x in itls], lats, duration, slo, spec),
    )


def knee_of(levels: Sequence[LevelResult]) -> LevelResult | None:
    """The level with the highest total tok/s (past it, more users only queue), among the levels
    that reached their concurrency; None with fewer than two such levels."""
    measured = [lv for lv in levels if lv.total_tok_s and lv.reached]
    if len(measured) < 2:
        return None
    return max(measured, key=lambda lv: lv.total_tok_s or 0.0)


def short_levels_warning(settings: BenchSettings) -> str | None:
    """Before a sweep: levels with fewer measured requests than their concurrency never reach it."""
    short = [c for c in settings.concurrency if settings.measured_for(c) < c]
    if not short:
        return None
    n = settings.measured_for(short[0])
    return (f"{', '.join(f'C{c}' for c in short)}: only {n} measured request{'s' if n != 1 else ''} per level, "
            f"so at most {n} in flight: those levels are reported with the concurrency reached, and no knee "
            f"is drawn from them (use --requests-per-level {max(short)} or more; NVIDIA: {MEASURED_FACTOR}x)")


# ---------------------------------------------------------------- the reference table

Verdict = Literal["comparable", "indicative", "not comparable"]


@dataclass(frozen=True)
class ReferenceComparison:
    """Whether a sweep's settings match the way the profile's reference table was measured.

    ``not comparable``: the output cap, the reasoning effort or fixed-length replies differ, so the
    figures measure something else (a 256-token cap never reaches the long decode of an 8,192-token
    one). ``indicative``: the same settings on other prompts (MTP's speed-up depends on them) or a
    reference whose method is not published."""

    verdict: Verdict
    source: str
    method: str  # the reference's settings in words
    reasons: tuple[str, ...] = ()

    @property
    def comparable(self) -> bool:
        return self.verdict != "not comparable"

    def line(self) -> str:
        head = f"reference: {self.source}" + (f" ({self.method})" if self.method else "")
        if self.verdict == "comparable":
            return head + " — comparable settings"
        return head + f" — {self.verdict.upper()}: " + "; ".join(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "method": self.method, "verdict": self.verdict,
                "reasons": list(self.reasons)}


def describe_method(method: dict[str, Any]) -> str:
    parts = []
    if method.get("prompts"):
        parts.append(str(method["prompts"]))
    if method.get("max_tokens"):
        parts.append(f"{int(method['max_tokens']):,}-token cap")
    if method.get("effort"):
        parts.append(f"reasoning {method['effort']}")
    return ", ".join(parts)


def compare_to_reference(settings: BenchSettings, method: dict[str, Any], prompts: str | None = None
                         ) -> ReferenceComparison:
    """``method``: the profile's ``[reference_method]`` (source; prompts: "built-in", a prompts
    file's name or a data set's; max_tokens; effort); ``prompts``: this sweep's prompts file, None
    for the built-in prompts. Same settings and prompts: comparable (e.g. a baseline of your own)."""
    source = str(method.get("source") or "the profile's reference")
    hard: list[str] = []
    soft: list[str] = []
    ref_cap = method.get("max_tokens")
    if ref_cap is None:
        soft.append("the reference's output cap is not published")
    elif int(ref_cap) != settings.max_tokens:
        hard.append(f"max tokens {settings.max_tokens:,} (reference {int(ref_cap):,})")
    if settings.ignore_eos:
        hard.append("fixed-length replies (ignore_eos; the reference stops at end of text)")
    ref_effort = method.get("effort")
    if ref_effort and settings.effort and settings.effort != ref_effort:
        hard.append(f"reasoning effort {settings.effort} (reference {ref_effort})")
    ref_prompts = method.get("prompts")  # "built-in", a prompts file's name, or a data set's name
    ours = "built-in" if prompts is None else Path(prompts).name
    if not ref_prompts:
        soft.append("the reference's prompts are not published")
    elif ours != ref_prompts:
        soft.append(("built-in coding prompts" if prompts is None else f"prompts from {ours}")
                    + f", not {ref_prompts}")
    verdict: Verdict = "not comparable" if hard else ("indicative" if soft else "comparable")
    return ReferenceComparison(verdict, source, describe_method(method), tuple(hard + soft))


# ---------------------------------------------------------------- the service's concurrency limit


def configured_max_num_seqs(config: Any) -> int | None:
    """``--max-num-seqs`` (vLLM) or ``--max-running-requests`` (SGLang) the profile plus
    ``config.overrides`` launch with; None when neither is set."""
    from console.service.engines import serving_settings

    settings = serving_settings(config.profile, config.overrides)
    for key in ("max_num_seqs", "max_running_requests"):
        value = settings.get(key)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None


def max_num_seqs_warning(limit: int | None, levels: Sequence[int], engine: str = "vllm") -> str | None:
    top = max(levels, default=0)
    if limit is None or top <= limit:
        return None
    flag = "--max-running-requests" if engine == "sglang" else "--max-num-seqs"
    return (f"the service runs with {flag} {limit}, below the highest concurrency {top}: requests "
            f"beyond {limit} queue, so C{top} measures the queue (NVIDIA relaunched with --max-num-seqs 32 "
            f"for its C32 row); set overrides.{flag[2:].replace('-', '_')} = {top} and restart")


def queue_warning(lv: LevelResult) -> str | None:
    """What the server itself reported: it ran fewer requests than were in flight, the rest queued."""
    run, wait = lv.server_running_max, lv.server_waiting_max
    if not wait or run is None or run >= lv.concurrency:
        return None
    return (f"C{lv.concurrency}: the server ran at most {run} requests at once and queued up to {wait}: "
            f"its --max-num-seqs (or KV cache) is below the concurrency, so this level measures the queue")


def generation_tokens(sample: MetricsSample) -> int | None:
    """The generation-token counter of one scrape. An engine's scrape without it has generated
    nothing yet (SGLang creates counters on first use); no engine metrics at all is unknown."""
    if "generation_tokens" in sample.invalid:  # out of range: unknown, never a 0 to compare with
        return None
    value = sample.counters.get("generation_tokens")
    if value is None:
        return 0 if sample.engine is not None else None
    return int(value)




@dataclass(frozen=True)
class BenchProgress:
    """Posted while a level runs; ``tok_s`` counts token chunks so far (live estimate)."""

    level: int  # index into the sweep
    levels: int
    concurrency: int
    phase: str  # "warmup" | "measure" | "verify" | "done"
    done: int
    total: int
    tok_s: float | None = None
    result: LevelResult | None = None
    depth: int = 0  # the prompt depth of the level


@dataclass
class BenchReport:
    url: str
    model: str
    settings: BenchSettings
    levels: list[LevelResult] = field(default_factory=list)
    records: dict[Any, list[RequestRecord]] = field(default_factory=dict)  # C, or (depth, C) past depth 0
    warnings: list[str] = field(default_factory=list)
    cancelled: bool = False
    started_at: float = field(default_factory=time.time)
    prompts: str | None = None  # the prompts file, None for the built-in prompts
    reference: ReferenceComparison | None = None

    @property
    def failed(self) -> bool:
        return any(lv.errors or lv.mismatch for lv in self.levels)

    def to_json(self, with_requests: bool = False) -> dict[str, Any]:
        s = self.settings
        out: dict[str, Any] = {
            "url": self.url,
            "model": self.model,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "settings": {"concurrency": list(s.concurrency), "requests_per_level": s.requests_per_level,
                         "warmup": s.warmup, "max_tokens": s.max_tokens, "effort": s.effort,
                         "ignore_eos": s.ignore_eos, "prompts": self.prompts or "built-in",
                         "depths": list(s.depths), "decode_floor": {"min_tokens": s.decode_floor_tokens,
                                                                    "min_decode_ms": MIN_DECODE_S * 1000},
                         "ci": CI_METHOD},
            "levels": [lv.to_json() for lv in self.levels],
            "warnings": list(self.warnings),
            "cancelled": self.cancelled,
        }
        if self.reference is not None:
            out["reference"] = self.reference.to_json()
        if s.slo is not None:
            out["slo"] = slo_answer(self.levels, s.slo)
        if with_requests:
            out["requests"] = {record_key(k): [asdict(r) for r in recs] for k, recs in self.records.items()}
        return out


CSV_FIELDS = ("concurrency", "requests", "output_tokens", "total_tok_s", "per_user_tok_s", "ttft_ms_mean",
              "ttft_ms_p50", "ttft_ms_p99", "itl_ms_mean", "itl_ms_p50", "itl_ms_p99", "latency_s_mean",
              "latency_s_p50", "latency_s_p99", "errors", "server_tokens", "mismatch", "duration_s",
              "server_running_max", "server_waiting_max", "concurrency_reached", "timed_requests",
              "depth", "input_tokens_mean", "ttft_ms_p90", "itl_ms_p90", "latency_s_p90", "goodput_pct",
              "goodput_req_s", "slo_met", "spec_accept_length")
CI_FIELDS = tuple(f"{m}_p{q}_ci95_{side}" for m in ("ttft_ms", "itl_ms", "latency_s") for q in (50, 90, 99)
                  for side in ("lo", "hi"))


def record_key(key: Any) -> str:
    """``requests``' key in the JSON: ``"8"`` for C8 at depth 0 (as before depths), ``"8@4096"`` past it."""
    if isinstance(key, tuple):
        depth, c = key
        return str(c) if not depth else f"{c}@{depth}"
    return str(key)


def to_csv(levels: Sequence[LevelResult]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS + CI_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for lv in levels:
        row = lv.to_json()
        for name, (lo, hi) in row.pop("ci95").items():
            row[f"{name}_ci95_lo"], row[f"{name}_ci95_hi"] = lo, hi
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def report_paths(path: str | Path) -> tuple[Path, Path]:
    """``PATH.json`` and ``PATH.csv`` for ``--out PATH`` (``PATH.json``/``PATH.csv`` given: the same)."""
    base = expand(path)
    if base.suffix in (".json", ".csv"):
        base = base.with_suffix("")
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".csv")


def page_paths(path: str | Path) -> tuple[Path, Path]:
    """``PATH.svg`` (the plot) and ``PATH.html`` (the report to attach) beside PATH.json."""
    jpath = report_paths(path)[0]
    return jpath.with_suffix(".svg"), jpath.with_suffix(".html")


def check_report_paths(path: str | Path, force: bool = False) -> tuple[Path, Path]:
    """Before the sweep: every file can be written (``safe_files.prepare_target``); FileProblem if not."""
    out = []
    for p in (*report_paths(path), *page_paths(path)):
        try:
            out.append(prepare_target(p, force))
        except FileProblem as exc:
            raise FileProblem(f"{p.name}: {exc}") from None
    return out[0], out[1]


def save_report(report: BenchReport, path: str | Path, force: bool = True, make_dirs: bool = True
                ) -> tuple[Path, Path]:
    """Write ``PATH.json`` (levels, settings, every request), ``PATH.csv`` (one row a level), ``PATH.svg``
    (the plot) and ``PATH.html`` (the report, plot inline; ``bench_files.py``) with the
    safe writer (``safe_files.write_replacing``: never through a symlink, never into a FIFO or over
    anything but a regular file; without ``force`` never over an existing file). ``make_dirs``: the
    console's own results directory (the TUI) is created; the CLI's ``--out`` directory must exist.
    Raises FileProblem or OSError."""
    jpath, cpath = report_paths(path)
    if make_dirs:
        jpath.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(report.to_json(with_requests=True), indent=2) + "\n").encode()
    write_replacing(jpath, lambda fh: fh.write(data), force=force, mode=0o644)
    rows = to_csv(report.levels).encode()
    write_replacing(cpath, lambda fh: fh.write(rows), force=force, mode=0o644)
    from console.serving.bench_files import to_html, to_svg

    spath, hpath = page_paths(path)
    svg = to_svg(report.levels, f"{report.model} · {time.strftime('%Y-%m-%d %H:%M', time.gmtime(report.started_at))}")
    write_replacing(spath, lambda fh: fh.write(svg.encode()), force=force, mode=0o644)
    page = to_html(report, svg).encode()
    write_replacing(hpath, lambda fh: fh.write(page), force=force, mode=0o644)
    return jpath, cpath


