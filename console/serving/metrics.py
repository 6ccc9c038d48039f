"""Engine ``/metrics`` -> a small snapshot the serving panel shows.

Parsing is pure and incremental (:class:`MetricsParser` takes the body chunk by chunk as it arrives
and keeps only the series we use: vLLM old and new names, SGLang names), so a 7.8 MB exposition costs
a pass over its lines, never a copy of it in objects. Every value from the server is checked against
what it can mean (no negative request count, no KV use over 100 %, no latency below zero, nothing
infinite, no 309-digit queue): an out-of-range value is *invalid* (``INVALID``, shown as such,
never raw), and one bad series, bucket label or line never discards the others. Rates and p50s
come from differences between samples, as Prometheus' ``rate`` and ``histogram_quantile`` would
compute them: generation tokens/s over the last few seconds, TTFT and inter-token latency p50 over
the last minute. :class:`ServingMonitor` is the only part doing I/O: it polls the API at a modest
rate (less often when ``/metrics`` is large) and posts snapshots; values stay on screen with their
age when the API stops answering.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from console.safe_files import MIB
from console.serving.client import MAX_METRICS_BYTES, ApiClient
from console.serving.errors import ApiError

# Each logical value -> the sample names that carry it, preferred first (new vLLM, old vLLM, SGLang).
GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "gen_throughput": ("sglang:gen_throughput",),
    "cache_hit_rate": ("sglang:cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate"),
    "spec_accept_length": ("sglang:spec_accept_length",),
    "spec_accept_rate": ("sglang:spec_accept_rate", "vllm:spec_decode_draft_acceptance_rate"),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "preemptions": ("vllm:num_preemptions_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
    "requests": ("vllm:request_success_total", "sglang:num_requests_total"),
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
}
_MEAN_GAUGES = {"kv_usage", "cache_hit_rate", "spec_accept_length", "spec_accept_rate"}

#: What each value can be (inclusive); outside it the server's number is invalid. Counts of requests
#: and tokens are never negative; ratios are 0..1; no engine runs a million requests at once.
RANGES: dict[str, tuple[float, float]] = {
    "running": (0, 1e6), "waiting": (0, 1e8), "kv_usage": (0, 1.0), "gen_throughput": (0, 1e8),
    "cache_hit_rate": (0, 1.0), "spec_accept_length": (0, 1e3), "spec_accept_rate": (0, 1.0),
    **{k: (0, 2.0**63) for k in COUNTERS},
}
#: Derived values out of these ranges are invalid too (a counter that jumps by 1e18 is no rate).
DERIVED_RANGES: dict[str, tuple[float, float]] = {
    "gen_tok_s": (0, 1e8), "prompt_tok_s": (0, 1e9), "ttft_p50_s": (0, 1e5), "itl_p50_s": (0, 1e4),
    "prefix_hit_rate": (0, 1.0), "spec_accept_rate": (0, 1.0), "spec_mean_len": (0, 1e3),
}

#: A value the server sent that cannot be what it claims (shown as "invalid"; None is unknown).
INVALID = math.nan

Buckets = tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted, +Inf last


def is_invalid(x: float | None) -> bool:
    """``x`` is ``INVALID`` (the only NaN past this parser: Prometheus' own NaN is dropped as unknown)."""
    return x is not None and math.isnan(x)


def known(x: float | None) -> float | None:
    """``x``, with ``INVALID`` as None: for a reader that needs a number or nothing (a count to compare,
    a value to record), where "the server sent nonsense" and "not sent" lead to the same step."""
    return None if x is None or math.isnan(x) else x


@dataclass(frozen=True)
class MetricsSample:
    """One scrape, reduced to the values we use (summed over engines/models; ratios averaged).
    ``invalid``: the logical values (gauge, counter or histogram keys) the server sent out of range."""

    t: float  # time.monotonic() of the scrape
    engine: str | None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Buckets] = field(default_factory=dict)
    invalid: frozenset[str] = frozenset()
    bad_lines: int = 0  # lines of our series that could not be read (skipped, the rest kept)
    size: int = 0  # bytes parsed


# sample name -> (kind, logical key, preference)
_WANTED: dict[bytes, tuple[str, str, int]] = {}
for _kind, _table in (("gauge", GAUGES), ("counter", COUNTERS)):
    for _key, _names in _table.items():
        for _i, _n in enumerate(_names):
            _WANTED[_n.encode()] = (_kind, _key, _i)
for _key, _names in HISTOGRAMS.items():
    for _i, _n in enumerate(_names):
        _WANTED[(_n + "_bucket").encode()] = ("bucket", _key, _i)

_PREFIXES = (b"vllm:", b"sglang:")  # every series we read starts so
_NAME = re.compile(rb"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LE = re.compile(rb'(?:^|[{,])[ \t]*le[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"')


class MetricsParser:
    """Prometheus text fed in chunks (``feed``), read as lines complete; ``sample()`` at the end.
    Only the lines of the series named in GAUGES/COUNTERS/HISTOGRAMS reach Python (one regex scan
    per chunk finds them); every other line costs that scan. A line over 64 KB is skipped unread."""

    MAX_LINE = 64 * 1024

    def __init__(self) -> None:
        self._rest = b""
        self._skip_rest = False  # inside an over-long line
        self.size = 0
        self.bad_lines = 0
        self._vals: dict[tuple[str, str], dict[int, list[float]]] = {}  # (kind, key) -> preference -> values
        self._buckets: dict[str, dict[int, dict[float, float]]] = {}
        self._bad_hist: dict[str, set[int]] = {}
        self._engines: set[str] = set()

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        data = self._rest + chunk if self._rest else chunk
        cut = data.rfind(b"\n") + 1  # complete lines end here; the rest waits for the next chunk
        self._rest = data[cut:]
        if self._skip_rest:  # the tail of an over-long line: dropped up to its newline
            nl = data.find(b"\n")
            if nl < 0:
                self._rest = b""
                return
            data, cut, self._skip_rest = data[nl + 1:], cut - nl - 1, False
        if len(self._rest) > self.MAX_LINE:
            self._rest, self._skip_rest = b"", True
        engines, wanted, name_re = self._engines, _WANTED, _NAME
        for line in data[:cut].split(b"\n"):
            if not line.startswith(_PREFIXES):  # not an engine's series (HELP/TYPE, process_*, python_*)
                continue
            if len(engines) < 2:
                engines.add("vllm" if line[0] == 118 else "sglang")  # 'v'
            name = name_re.match(line).group()  # type: ignore[union-attr]  # a prefix matched: never None
            if name in wanted:
                self._sample(name, line[len(name):])

    def _sample(self, name: bytes, rest: bytes) -> None:
        """One line of a series we use: ``rest`` is what follows the name (labels, value, timestamp)."""
        want = _WANTED[name]
        kind, key, pref = want
        # the label set ends at the line's last "}" (a value or a timestamp holds none)
        close = rest.rfind(b"}")
        if close < 0 and rest[:1] == b"{":
            self.bad_lines += 1
            return
        tokens = rest[close + 1:].split()
        try:
            if not 1 <= len(tokens) <= 2:
                raise ValueError
            value = float(tokens[0])
        except ValueError:
            self.bad_lines += 1
            return
        if math.isnan(value):  # Prometheus' "no value": unknown, not invalid
            return
        if kind == "bucket":
            le_m = _LE.search(rest, 0, close + 1) if close >= 0 else None
            try:
                le = float(le_m.group(1)) if le_m else math.nan
            except ValueError:
                le = math.nan
            if math.isnan(le):  # a bucket without a readable bound: that one bucket is skipped
                self.bad_lines += 1
                return
            if le < 0 or value == math.inf or value < 0:  # a latency below zero, a negative count
                self._bad_hist.setdefault(key, set()).add(pref)
                return
            b = self._buckets.setdefault(key, {}).setdefault(pref, {})
            b[le] = b.get(le, 0.0) + value
            return
        self._vals.setdefault((kind, key), {}).setdefault(pref, []).append(value)

    def sample(self, t: float = 0.0) -> MetricsSample:
        if self._rest and not self._skip_rest:  # the last line had no newline: complete it
            self.feed(b"\n")
            self.size -= 1
        invalid: set[str] = set()
        gauges: dict[str, float] = {}
        counters: dict[str, float] = {}
        for (kind, key), by_pref in self._vals.items():
            values = by_pref[min(by_pref)]
            lo, hi = RANGES[key]
            total = sum(values)
            if not (all(lo <= v <= hi for v in values) and lo <= total <= hi):
                invalid.add(key)
                continue
            if kind == "gauge":
                gauges[key] = total / len(values) if key in _MEAN_GAUGES else total
            else:
                counters[key] = total
        hists: dict[str, Buckets] = {}
        for key in HISTOGRAMS:
            prefs = set(self._buckets.get(key, {})) | self._bad_hist.get(key, set())
            if not prefs:
                continue
            best = min(prefs)
            if best in self._bad_hist.get(key, set()):
                invalid.add(key)
            else:
                hists[key] = tuple(sorted(self._buckets[key][best].items()))
        engine = "vllm" if "vllm" in self._engines else "sglang" if "sglang" in self._engines else None
        return MetricsSample(t, engine, gauges, counters, hists, frozenset(invalid), self.bad_lines, self.size)


def _parse_chunks(chunks: list[bytes], t: float) -> MetricsSample:
    p = MetricsParser()
    for c in chunks:
        p.feed(c)
    return p.sample(t)


def parse_metrics(text: str | bytes, t: float = 0.0) -> MetricsSample:
    """Parse Prometheus text from vLLM or SGLang (all at once). Unknown metrics are ignored."""
    p = MetricsParser()
    p.feed(text.encode("utf-8", "replace") if isinstance(text, str) else text)
    return p.sample(t)


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets; None when empty."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_cum = 0.0, 0.0
    for le, cum in buckets:
        if cum >= rank and cum > prev_cum:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_cum) / (cum - prev_cum)
        prev_le, prev_cum = le, cum
    return prev_le


def bucket_delta(new: Buckets, old: Buckets | None) -> Buckets:
    """Buckets observed between two scrapes; a counter reset means everything is new."""
    if not old:
        return new
    before = dict(old)
    out = tuple((le, cum - before.get(le, 0.0)) for le, cum in new)
    if any(c < 0 for _, c in out):
        return new
    return out


def counter_delta(new: float | None, old: float | None) -> float | None:
    if new is None or old is None:
        return None
    return new if new < old else new - old  # a reset: the server restarted


@dataclass(frozen=True)
class ServingSnapshot:
    """What the serving panel shows. ``None`` means unknown (shown as a dash, never invented)."""

    url: str = ""
    healthy: bool | None = None
    status: str = "unknown"  # ok | unhealthy | unreachable | unauthorized | missed (< MISSES_FOR_RED) | unknown
    error: str | None = None  # the last poll failed: the values shown are old
    note: str | None = None  # a problem that leaves the values fresh (the key refused for /v1/models)
    model: str | None = None
    version: str | None = None
    engine: str | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0..1
    gen_tok_s: float | None = None
    prompt_tok_s: float | None = None
    ttft_p50_s: float | None = None
    itl_p50_s: float | None = None
    prefix_hit_rate: float | None = None  # 0..1
    spec_accept_rate: float | None = None  # 0..1
    spec_mean_len: float | None = None  # tokens per draft step, 1 + accepted/drafts
    preemptions: float | None = None
    updated_at: float | None = None  # wall time (time.time()) of the last good scrape
    polled_at: float | None = None  # wall time of the last attempt
    http_status: int | None = None  # /health's HTTP status when it was not a 2xx (503, a 302 redirect)
    invalid: tuple[str, ...] = ()  # the values the server sent out of range (logical names)
    metrics_size: int | None = None  # bytes of the last /metrics read
    metrics_every_s: float | None = None  # a large /metrics is read this seldom (None: every round)
    # the liveness the progress judge and the health line read
    gen_tokens_total: float | None = None  # the generation-token counter as read (the engine's heartbeat)
    misses: int = 0  # consecutive health checks missed (no answer or a 5xx); red only at MISSES_FOR_RED
    miss: str | None = None  # the last miss in words: "refused: down", "timed out: hung or saturated", "HTTP 500"
    health_path: str = "/health"  # the health check asked: SGLang's /health_generate runs a generation

    def age_s(self, now: float | None = None) -> float | None:
        if self.updated_at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.updated_at)

    def is_stale(self, now: float | None = None, after_s: float = 10.0) -> bool:
        age = self.age_s(now)
        return self.error is not None or age is None or age > after_s


class MetricsTracker:
    """Keeps the last minute of samples and derives rates and p50s from them (pure, no clock)."""

    def __init__(self, window_s: float = 60.0, rate_window_s: float = 10.0):
        self.window_s = window_s
        self.rate_window_s = rate_window_s
        self.samples: deque[MetricsSample] = deque()

    def add(self, sample: MetricsSample) -> None:
        if self.samples and sample.t < self.samples[-1].t:
            self.samples.clear()
        self.samples.append(sample)
        while len(self.samples) > 2 and self.samples[1].t <= sample.t - self.window_s:
            self.samples.popleft()

    def _base(self, window: float) -> MetricsSample | None:
        """The oldest sample at most ``window`` before the newest; after a gap in polling, the
        one before the newest (a rate over a longer span beats no rate)."""
        if len(self.samples) < 2:
            return None
        newest = self.samples[-1]
        for s in self.samples:
            if s is not newest and s.t >= newest.t - window - 1e-9:
                return s
        return self.samples[-2]

    def derive(self) -> dict[str, float | None]:
        """The panel's values; INVALID where the server's numbers they come from were out of range."""
        if not self.samples:
            return {}
        new = self.samples[-1]
        bad = new.invalid
        out: dict[str, float | None] = {
            "running": INVALID if "running" in bad else new.gauges.get("running"),
            "waiting": INVALID if "waiting" in bad else new.gauges.get("waiting"),
            "kv_usage": INVALID if "kv_usage" in bad else new.gauges.get("kv_usage"),
            "preemptions": INVALID if "preemptions" in bad else new.counters.get("preemptions"),
        }
        rate_base = self._base(self.rate_window_s)

        def gauge(key: str) -> float | None:
            return INVALID if key in bad else new.gauges.get(key)

        def rate(key: str) -> float | None:
            if key in bad:
                return INVALID
            if rate_base is None or new.t <= rate_base.t:
                return None
            # a counter absent before had not been incremented yet (SGLang creates them lazily)
            d = counter_delta(new.counters.get(key), rate_base.counters.get(key, 0.0))
            return None if d is None else d / (new.t - rate_base.t)

        out["gen_tok_s"] = rate("generation_tokens")
        if out["gen_tok_s"] is None:
            out["gen_tok_s"] = gauge("gen_throughput")
        out["prompt_tok_s"] = rate("prompt_tokens")

        base = self._base(self.window_s)
        for key in ("ttft", "itl"):
            h = new.histograms.get(key)
            if key in bad:
                out[f"{key}_p50_s"] = INVALID
            elif h is None or base is None:
                out[f"{key}_p50_s"] = None
            else:
                out[f"{key}_p50_s"] = histogram_quantile(0.5, bucket_delta(h, base.histograms.get(key)))

        def ratio(num: str, den: str) -> float | None:
            """Over the window when anything happened in it, else since the server started."""
            if num in bad or den in bad:
                return INVALID
            n, d = new.counters.get(num), new.counters.get(den)
            if n is None or d is None:
                return None
            if base is not None:
                dn = counter_delta(n, base.counters.get(num))
                dd = counter_delta(d, base.counters.get(den))
                if dn is not None and dd:
                    return dn / dd
            return n / d if d else None

        out["prefix_hit_rate"] = ratio("prefix_hits", "prefix_queries")
        if out["prefix_hit_rate"] is None:
            out["prefix_hit_rate"] = gauge("cache_hit_rate")
        out["spec_accept_rate"] = ratio("spec_accepted", "spec_draft_tokens")
        per_draft = ratio("spec_accepted", "spec_drafts")
        out["spec_mean_len"] = None if per_draft is None else 1.0 + per_draft
        if out["spec_accept_rate"] is None:
            out["spec_accept_rate"] = gauge("spec_accept_rate")
        if out["spec_mean_len"] is None:
            out["spec_mean_len"] = gauge("spec_accept_length")
        for key, (lo, hi) in DERIVED_RANGES.items():
            v = out.get(key)
            if v is not None and not lo <= v <= hi:
                out[key] = INVALID
        return out


# ---------------------------------------------------------------- the poller (I/O)

#: A health check that fails this many times in a row reads as down (red); fewer is a warning. One
#: timeout of a saturated server is not an outage (gonka-ai/gonka PR #1421: 8 false restarts a day -> 0).
MISSES_FOR_RED = 3


def miss_words(kind: str | None, status: int | None) -> str:
    """What a missed health check means: refused = down, timeout = hung or saturated, 5xx = error."""
    if status is not None:
        return f"HTTP {status}: error"
    if kind == "timeout":
        return "timeout: hung or saturated"
    return "refused: down"


LARGE_METRICS = 1 * MIB  # vLLM's own exposition is ~100-300 KB; beyond this, read it less often
METRICS_CPU_PCT = 5.0  # what parsing a large /metrics may cost of a core, on average
MAX_METRICS_EVERY_S = 60.0
# While requests run the generation-token counter is the heartbeat a wedge is judged by: a freeze is
# proven from the first read that saw the counter's last value, so the read period adds up to one period
# to the time a wedge shows (W + period at worst). Idle, the round keeps ``interval_s``.
BUSY_INTERVAL_S = 1.0


class ServingMonitor:
    """Polls one API (health, model, version, metrics) and posts a snapshot after each round.

    Runs as an asyncio task in the app's loop (httpx is async; nothing blocks). On failure the
    last values are kept and the snapshot carries the error, so the panel can show their age."""

    def __init__(self, client: ApiClient, post: Callable[[ServingSnapshot], None], interval_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.post = post
        self.interval_s = interval_s
        self.clock = clock
        self.tracker = MetricsTracker()
        self.snapshot = ServingSnapshot(url=client.base_url)
        self._rounds = 0
        self._next_metrics_at = 0.0
        self._health_path = "/health"
        self._no_health_generate = False

    async def poll_once(self, refresh: bool = False) -> ServingSnapshot:
        """One round; the model list and version are re-read every 15 rounds or on ``refresh``;
        a large ``/metrics`` (over LARGE_METRICS) is read at most every ``metrics_every_s``."""
        snap = self.snapshot
        now = time.time()
        health = await self._health(snap)
        # a miss (no answer, a 5xx) of an API that answered is a warning until MISSES_FOR_RED in a row
        missed = not health.ok and (health.status is None or health.status >= 500)
        misses = snap.misses + 1 if missed else 0
        grace = missed and misses < MISSES_FOR_RED and snap.status in ("ok", "unauthorized", "missed")
        marks = {"misses": misses, "miss": miss_words(health.kind, health.status) if missed else None,
                 "health_path": self._health_path}
        # no HTTP answer: skip the rest of the round (but a /health_generate that times out is a wedge's
        # sign while /metrics may still answer: read it, the counter tells)
        if not health.ok and health.status is None and not (health.kind == "timeout"
                                                             and self._health_path != "/health"):
            self._rounds += 1
            self.snapshot = replace(snap, healthy=False, status="missed" if grace else "unreachable",
                                    error=health.error, polled_at=now, http_status=None, **marks)
            return self.snapshot
        # 503 (or a redirect) with /metrics still answering: the values are fresh, the status says unhealthy
        status = "ok" if health.ok else "unhealthy" if health.status is not None else "unreachable"
        error = None
        updated: dict = {"note": snap.note if health.ok else health.error,
                         "http_status": None if health.ok else health.status}
        try:
            if refresh or snap.model is None or self._rounds % 15 == 0:
                updated["version"] = await self.client.version()
                models = await self.client.models()
                updated["model"] = models[0]["id"] if models else None
                updated["note"] = None
        except ApiError as exc:
            if exc.kind == "unauthorized":
                updated["note"] = str(exc)
        if updated["note"] and health.ok:
            status = "unauthorized"
        if not health.ok:
            updated["note"] = health.error
        if refresh or self.clock() >= self._next_metrics_at:
            try:
                updated |= await self._read_metrics(now)
            except ApiError as exc:
                error = str(exc)
                if exc.kind in ("connect", "timeout"):
                    status = "unreachable"
                elif exc.kind == "too-large":
                    error = f"metrics too large (over {MAX_METRICS_BYTES // MIB} MB): not read"
            except Exception as exc:  # noqa: BLE001 - the panel must keep updating, whatever the text was
                error = f"/metrics: cannot parse ({type(exc).__name__}: {str(exc)[:80]})"
        elif snap.error is not None and snap.error.startswith(("metrics", "/metrics")):
            error = snap.error  # between two reads of a large body, its last verdict stands
        self._rounds += 1
        if grace and status in ("unhealthy", "unreachable"):
            status = "missed"
        self.snapshot = replace(snap, healthy=health.ok, status=status, error=error, polled_at=now, **updated,
                                **marks)
        return self.snapshot

    async def _health(self, snap: ServingSnapshot):
        """The health check: SGLang's ``/health_generate`` (it runs a generation, so a wedged engine
        fails it) once the engine is known to be SGLang; ``/health`` where that path is not served."""
        if snap.engine == "sglang" and self._health_path == "/health" and not self._no_health_generate:
            self._health_path = "/health_generate"
        health = await self.client.health(self._health_path)
        if self._health_path != "/health" and health.status in (404, 405):
            self._health_path, self._no_health_generate = "/health", True
            health = await self.client.health(self._health_path)
        return health

    async def _read_metrics(self, now: float) -> dict:
        """Read ``/metrics`` (the chunks as they came: never joined into one copy), parse them in a
        thread (the UI loop never waits on a large body), and set from the parse's cost how seldom
        a large one is read again: at most ~METRICS_CPU_PCT % of a core for it."""
        chunks: list[bytes] = []
        await self.client.metrics_feed(chunks.append)
        t0 = time.perf_counter()
        sample = await asyncio.to_thread(_parse_chunks, chunks, self.clock())
        cost = time.perf_counter() - t0
        every = None
        if sample.size > LARGE_METRICS:
            every = min(MAX_METRICS_EVERY_S, max(self.interval_s, cost * 100 / METRICS_CPU_PCT))
        self._next_metrics_at = self.clock() + (every or 0.0)
        self.tracker.add(sample)
        gen = INVALID if "generation_tokens" in sample.invalid else sample.counters.get("generation_tokens")
        return self.tracker.derive() | {"gen_tokens_total": gen, "engine": sample.engine, "updated_at": now, "metrics_size": sample.size,
                                        "metrics_every_s": every, "invalid": tuple(sorted(sample.invalid))}

    def gap_s(self) -> float:
        """The time between two rounds' starts: shorter while requests run or wait (see BUSY_INTERVAL_S)."""
        s = self.snapshot
        busy = (known(s.running) or 0.0) + (known(s.waiting) or 0.0) > 0
        return min(self.interval_s, BUSY_INTERVAL_S) if busy else self.interval_s

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                self.post(await self.poll_once())
            except Exception as exc:  # noqa: BLE001 - the panel must keep updating, whatever broke
                self.snapshot = replace(self.snapshot, error=f"poll failed: {type(exc).__name__}: {exc}"[:200],
                                        polled_at=time.time())
                self.post(self.snapshot)
            # rounds start a gap apart; a slow round (an API that times out) still leaves a quarter gap free
            gap = self.gap_s()
            await asyncio.sleep(max(gap / 4, gap - (time.monotonic() - started)))
