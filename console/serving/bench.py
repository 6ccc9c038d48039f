"""Concurrency sweep against the served model, measured the way AIPerf measures.

NVIDIA's headline table (concurrency 1/8/16/32 -> total tok/s, per-user tok/s, latency, TTFT, ITL)
comes from AIPerf; to sit beside it the numbers here use the same definitions
(shared/reference/engines.md): TTFT = first token chunk - request start, latency = last token chunk
- request start, OSL = ``usage.completion_tokens`` (reasoning included), ITL = (latency - TTFT) /
(OSL - 1), per-user tok/s = mean of 1/ITL, total tok/s = all output tokens / (last response - first
request). The method is NVIDIA's too: per level a warm-up of 3x concurrency requests, then 10x
concurrency measured requests, keeping ``concurrency`` requests in flight.

The tokens counted from ``usage`` are checked against the server's own generation-token counter
(``/metrics`` delta over the measured phase): a mismatch means the numbers cannot be trusted (other
traffic, a server without usage, an aborted stream). :func:`summarize` and the percentile helpers
are pure; :class:`BenchRunner` does the I/O through :class:`~console.serving.client.ApiClient`.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from console.serving.client import TOKEN_KINDS, ApiClient, ApiError, ChatEvent, ChatRequest
from console.serving.metrics import MetricsSample, parse_metrics

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

#: Coding prompts in the spirit of SPEED-Bench Coding (the real set is gated; these are our own).
BUILTIN_PROMPTS: tuple[str, ...] = (
    "Write a Python function that parses an ISO 8601 duration like 'P3DT4H5M' into seconds, with tests.",
    "Implement an LRU cache in Rust with O(1) get and put, and explain the ownership choices.",
    "Given a list of intervals, merge all overlapping ones. Write it in Go and give the complexity.",
    "Write a SQL query that returns, per customer, the three most recent orders and their total value.",
    "Refactor this JavaScript callback pyramid into async/await with proper error handling: "
    "readFile(a, (e, x) => { parse(x, (e2, y) => { save(y, (e3) => done(e3)) }) })",
    "Write a thread-safe bounded queue in C++17 with blocking push and pop and a close() method.",
    "Explain and implement Dijkstra's algorithm in Python with a binary heap; handle unreachable nodes.",
    "Write a bash script that rotates log files larger than 100 MB, keeping the last five compressed.",
    "Design a REST API for a todo service with users and shared lists; give the routes and JSON shapes.",
    "Write a Python asyncio TCP server that echoes lines back and closes idle clients after 30 seconds.",
    "Implement a trie in TypeScript supporting insert, search and prefix listing, with unit tests.",
    "Find the bug: def mean(xs): return sum(xs) / len(xs) - it crashes in production. Fix it robustly.",
    "Write a Dockerfile for a Python web app with a multi-stage build and a non-root user.",
    "Implement binary search over a rotated sorted array in Java and prove it terminates.",
    "Write a regular expression that validates IPv4 addresses and explain each part; add test cases.",
    "Implement a rate limiter (token bucket) in Python usable from many threads, with tests.",
)

Messages = tuple[dict[str, Any], ...]


# ---------------------------------------------------------------- prompts


def load_prompts(path: str | Path) -> tuple[Messages, ...]:
    """Prompts from a JSONL file: one object a line with ``prompt``/``text`` (a string),
    ``texts`` (AIPerf's list, first used) or ``messages`` (OpenAI chat messages).

    Raises ValueError naming the line on anything else (the CLI makes it a usage error)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read prompts file {p}: {exc}") from None
    out: list[Messages] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise ValueError(f"{p}:{no}: not JSON") from None
        out.append(_messages_from(obj, f"{p}:{no}"))
    if not out:
        raise ValueError(f"{p}: no prompts in the file")
    return tuple(out)


def _messages_from(obj: Any, where: str) -> Messages:
    if isinstance(obj, dict):
        msgs = obj.get("messages")
        if isinstance(msgs, list) and msgs and all(isinstance(m, dict) and "role" in m for m in msgs):
            return tuple(msgs)
        for key in ("prompt", "text"):
            if isinstance(obj.get(key), str) and obj[key].strip():
                return ({"role": "user", "content": obj[key]},)
        texts = obj.get("texts")
        if isinstance(texts, list) and texts and isinstance(texts[0], str):
            return ({"role": "user", "content": texts[0]},)
    raise ValueError(f"{where}: expected an object with 'prompt', 'text', 'texts' or 'messages'")


def builtin_prompts() -> tuple[Messages, ...]:
    return tuple(({"role": "user", "content": p},) for p in BUILTIN_PROMPTS)


# ---------------------------------------------------------------- settings


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,8,16,32"`` -> (1, 8, 16, 32); ValueError with one line on anything else."""
    levels: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"--concurrency: {part!r} is not a positive integer (e.g. 1,8,16,32)")
        if int(part) > 4096:
            raise ValueError(f"--concurrency: {part} is more than 4096 requests in flight")
        if int(part) not in levels:
            levels.append(int(part))
    return tuple(levels)


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

    def __post_init__(self) -> None:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency levels must be positive integers")
        if self.requests_per_level is not None and self.requests_per_level < 1:
            raise ValueError("requests per level must be at least 1")
        if self.warmup is not None and self.warmup < 0:
            raise ValueError("warm-up requests cannot be negative")
        if self.max_tokens < 1:
            raise ValueError("max tokens must be at least 1")

    def measured_for(self, c: int) -> int:
        return self.requests_per_level if self.requests_per_level is not None else MEASURED_FACTOR * c

    def warmup_for(self, c: int) -> int:
        return self.warmup if self.warmup is not None else WARMUP_FACTOR * c


# ---------------------------------------------------------------- records and definitions


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
        if self.itl_s is None or (self.output_tokens or 0) < MIN_TIMED_TOKENS:
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


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default, which AIPerf uses)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


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
                       + f"{what} long enough to time decoding ({median}; need {MIN_TIMED_TOKENS}+ tokens "
                       f"over {MIN_DECODE_S * 1000:.0f}+ ms)")
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_samples"] = list(self.error_samples)
        d["notes"] = self.notes()
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 4)
        return d


def summarize(concurrency: int, records: Sequence[RequestRecord], server_tokens: int | None = None,
              server_peaks: dict[str, float] | None = None) -> LevelResult:
    """Per-level figures from measured requests, with AIPerf's definitions (pure)."""
    peaks = server_peaks or {}
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    duration = None
    if ok:
        duration = max(r.end for r in ok) - min(r.start for r in records)
    ttfts = [r.ttft_s * 1000 for r in ok if r.ttft_s is not None]
    itls = [r.itl_s for r in ok if r.timed and r.itl_s is not None]
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
    value = sample.counters.get("generation_tokens")
    if value is None:
        return 0 if sample.engine is not None else None
    return int(value)


# ---------------------------------------------------------------- the runner (I/O)


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


@dataclass
class BenchReport:
    url: str
    model: str
    settings: BenchSettings
    levels: list[LevelResult] = field(default_factory=list)
    records: dict[int, list[RequestRecord]] = field(default_factory=dict)
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
                         "ignore_eos": s.ignore_eos, "prompts": self.prompts or "built-in"},
            "levels": [lv.to_json() for lv in self.levels],
            "warnings": list(self.warnings),
            "cancelled": self.cancelled,
        }
        if self.reference is not None:
            out["reference"] = self.reference.to_json()
        if with_requests:
            out["requests"] = {str(c): [asdict(r) for r in recs] for c, recs in self.records.items()}
        return out


CSV_FIELDS = ("concurrency", "requests", "output_tokens", "total_tok_s", "per_user_tok_s", "ttft_ms_mean",
              "ttft_ms_p50", "ttft_ms_p99", "itl_ms_mean", "itl_ms_p50", "itl_ms_p99", "latency_s_mean",
              "latency_s_p50", "latency_s_p99", "errors", "server_tokens", "mismatch", "duration_s",
              "server_running_max", "server_waiting_max", "concurrency_reached", "timed_requests")


def to_csv(levels: Sequence[LevelResult]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for lv in levels:
        w.writerow({k: ("" if v is None else v) for k, v in lv.to_json().items()})
    return buf.getvalue()


def save_report(report: BenchReport, path: str | Path) -> tuple[Path, Path]:
    """Write ``PATH.json`` (levels, settings, every request) and ``PATH.csv`` (one row a level)."""
    base = Path(path)
    if base.suffix in (".json", ".csv"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    jpath, cpath = base.with_name(base.name + ".json"), base.with_name(base.name + ".csv")
    jpath.write_text(json.dumps(report.to_json(with_requests=True), indent=2) + "\n")
    cpath.write_text(to_csv(report.levels))
    return jpath, cpath


class BenchRunner:
    """Runs a sweep through one :class:`ApiClient`; cancel by cancelling the task running
    :meth:`run` (in-flight streams are closed, so the server aborts them; finished levels stay in
    ``report``)."""

    def __init__(self, client: ApiClient, model: str, settings: BenchSettings,
                 prompts: Sequence[Messages] | None = None,
                 on_progress: Callable[[BenchProgress], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.client = client
        self.model = model
        self.settings = settings
        self.prompts = tuple(prompts) if prompts else builtin_prompts()
        self.on_progress = on_progress
        self.clock = clock
        self.report = BenchReport(client.base_url, model, settings)
        self._next_prompt = 0
        self._chunks = 0  # token chunks received, in-flight requests included
        self._done_chunks = 0  # ... by finished requests
        self._done_tokens = 0  # usage tokens of finished requests

    def _request(self) -> ChatRequest:
        msgs = self.prompts[self._next_prompt % len(self.prompts)]
        self._next_prompt += 1
        s = self.settings
        return ChatRequest(messages=msgs, model=self.model, max_tokens=s.max_tokens, effort=s.effort,
                           extra={"ignore_eos": True} if s.ignore_eos else {})

    async def _one(self, req: ChatRequest) -> RequestRecord:
        chunks = 0

        def on_event(ev: ChatEvent) -> None:
            nonlocal chunks
            if ev.kind in TOKEN_KINDS:
                chunks += 1
                self._chunks += 1

        start = self.clock()
        res = await self.client.chat(req, on_event=on_event)
        end = self.clock()
        if res.cancelled:
            raise asyncio.CancelledError
        self._done_chunks += chunks
        self._done_tokens += res.output_tokens or 0
        error = None
        if res.error is not None:
            error = f"{res.error.kind}: {res.error}"
        elif res.output_tokens is None:
            error = "no usage in the reply (stream_options.include_usage unsupported?)"
        elif res.ttft_s is None:
            error = "the reply carried no token"
        return RequestRecord(start, end, res.ttft_s, res.latency_s, res.output_tokens, chunks, error)

    async def _phase(self, index: int, c: int, n: int, phase: str) -> list[RequestRecord]:
        """``n`` requests with ``c`` in flight (AIPerf's concurrency mode)."""
        records: list[RequestRecord] = []
        issued = 0
        t0 = self.clock()
        tokens0 = self._live_tokens()

        def post() -> None:
            if self.on_progress is None:
                return
            dt = self.clock() - t0
            rate = (self._live_tokens() - tokens0) / dt if dt > 0.2 else None
            self.on_progress(BenchProgress(index, len(self.settings.concurrency), c, phase, len(records), n, rate))

        async def worker() -> None:
            nonlocal issued
            while issued < n:
                issued += 1
                records.append(await self._one(self._request()))
                post()

        async def ticker() -> None:  # long replies: the live rate moves between completions too
            while True:
                await asyncio.sleep(PROGRESS_S)
                post()

        post()
        tasks = [asyncio.create_task(worker()) for _ in range(min(c, n))]
        tick = asyncio.create_task(ticker()) if self.on_progress is not None else None
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if tick is not None:
                tick.cancel()
                await asyncio.gather(tick, return_exceptions=True)
        return records

    def _live_tokens(self) -> float:
        """Tokens so far: usage of finished requests plus in-flight chunks at the tokens-per-chunk
        seen so far (MTP puts several tokens in one chunk)."""
        per_chunk = self._done_tokens / self._done_chunks if self._done_chunks else 1.0
        return self._done_tokens + (self._chunks - self._done_chunks) * per_chunk

    async def server_tokens(self) -> int | None:
        """The server's generation-token counter, or None when /metrics has none."""
        try:
            return generation_tokens(parse_metrics(await self.client.metrics_text()))
        except (ApiError, ValueError):
            return None

    async def _settled(self, expected: int | None = None) -> int | None:
        """The counter once it stops moving (or reaches ``expected``): engines publish their
        stats a scheduler step after the last response may have gone out."""
        deadline = self.clock() + self.settings.settle_s
        last = await self.server_tokens()
        while last is not None and self.clock() < deadline:
            if expected is not None and last == expected:
                return last
            await asyncio.sleep(0.1)
            now = await self.server_tokens()
            if now == last and expected is None:
                return now
            last = now
        return last

    async def _watch(self, peaks: dict[str, float]) -> None:
        """Peak running/waiting requests the server reports while a level is measured."""
        while True:
            try:
                gauges = parse_metrics(await self.client.metrics_text()).gauges
            except (ApiError, ValueError):
                return
            for key in ("running", "waiting"):
                if key in gauges:
                    peaks[key] = max(peaks.get(key, 0.0), gauges[key])
            await asyncio.sleep(self.settings.watch_s)

    async def run_level(self, index: int, c: int) -> LevelResult:
        s = self.settings
        if s.warmup_for(c):
            await self._phase(index, c, s.warmup_for(c), "warmup")
        before = await self._settled()
        peaks: dict[str, float] = {}
        watch = asyncio.create_task(self._watch(peaks)) if before is not None else None
        try:
            records = await self._phase(index, c, s.measured_for(c), "measure")
        finally:
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
        counted = sum(r.output_tokens or 0 for r in records if r.ok)
        server = None
        if before is not None:
            self._post(index, c, "verify", len(records), len(records))
            after = await self._settled(before + counted)
            if after is not None and after >= before:
                server = after - before
        self.report.records[c] = records
        result = summarize(c, records, server, peaks)
        self.report.levels.append(result)
        if (w := queue_warning(result)) is not None:
            self.report.warnings.append(w)
        self._post(index, c, "done", len(records), len(records), result)
        return result

    def _post(self, index: int, c: int, phase: str, done: int, total: int, result: LevelResult | None = None) -> None:
        if self.on_progress is not None:
            tok_s = result.total_tok_s if result else None
            self.on_progress(BenchProgress(index, len(self.settings.concurrency), c, phase, done, total,
                                           tok_s, result))

    async def run(self) -> BenchReport:
        try:
            for i, c in enumerate(self.settings.concurrency):
                await self.run_level(i, c)
        except asyncio.CancelledError:
            self.report.cancelled = True
            raise
        return self.report


async def resolve_model(client: ApiClient, hint: str | None) -> str:
    """The hint when the server lists it, else the server's first model; ApiError when none."""
    ids = [m["id"] for m in await client.models()]
    if hint and (hint in ids or not ids):
        return hint
    if not ids:
        raise ApiError("http", f"{client.base_url}/v1/models lists no model; pass --model")
    return ids[0]
