"""Engine ``/metrics`` -> a small snapshot the serving panel shows.

Parsing is pure (prometheus_client's text parser, vLLM old and new names, SGLang names). Rates
and p50s come from differences between samples, as Prometheus' ``rate`` and
``histogram_quantile`` would compute them: generation tokens/s over the last few seconds, TTFT and
inter-token latency p50 over the last minute. :class:`ServingMonitor` is the only part doing I/O:
it polls the API at a modest rate and posts snapshots; values stay on screen with their age when
the API stops answering.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from prometheus_client.parser import text_string_to_metric_families

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

Buckets = tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted, +Inf last


@dataclass(frozen=True)
class MetricsSample:
    """One scrape, reduced to the values we use (summed over engines/models; ratios averaged)."""

    t: float  # time.monotonic() of the scrape
    engine: str | None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Buckets] = field(default_factory=dict)


def parse_metrics(text: str, t: float = 0.0) -> MetricsSample:
    """Parse Prometheus text from vLLM or SGLang. Unknown metrics are ignored."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    buckets: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created") or not math.isfinite(s.value):
                continue  # NaN or an infinite counter would turn into an absurd rate
            if s.name.endswith("_bucket") and "le" in s.labels:
                b = buckets.setdefault(s.name[: -len("_bucket")], {})
                le = float(s.labels["le"])
                if math.isnan(le):
                    continue
                b[le] = b.get(le, 0.0) + s.value
                continue
            sums[s.name] = sums.get(s.name, 0.0) + s.value
            counts[s.name] = counts.get(s.name, 0) + 1

    def pick(names: Iterable[str], mean: bool) -> float | None:
        for n in names:
            if n in sums:
                return sums[n] / counts[n] if mean else sums[n]
        return None

    gauges = {k: v for k, names in GAUGES.items() if (v := pick(names, k in _MEAN_GAUGES)) is not None}
    counters = {k: v for k, names in COUNTERS.items() if (v := pick(names, False)) is not None}
    hists: dict[str, Buckets] = {}
    for k, names in HISTOGRAMS.items():
        for n in names:
            if n in buckets:
                hists[k] = tuple(sorted(buckets[n].items()))
                break
    names = set(sums) | set(buckets)
    engine = ("vllm" if any(n.startswith("vllm:") for n in names)
              else "sglang" if any(n.startswith("sglang:") for n in names) else None)
    return MetricsSample(t, engine, gauges, counters, hists)


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
    status: str = "unknown"  # ok | unhealthy | unreachable | unauthorized | unknown
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
        if not self.samples:
            return {}
        new = self.samples[-1]
        out: dict[str, float | None] = {
            "running": new.gauges.get("running"),
            "waiting": new.gauges.get("waiting"),
            "kv_usage": new.gauges.get("kv_usage"),
            "preemptions": new.counters.get("preemptions"),
        }
        rate_base = self._base(self.rate_window_s)

        def rate(key: str) -> float | None:
            if rate_base is None or new.t <= rate_base.t:
                return None
            # a counter absent before had not been incremented yet (SGLang creates them lazily)
            d = counter_delta(new.counters.get(key), rate_base.counters.get(key, 0.0))
            return None if d is None else d / (new.t - rate_base.t)

        out["gen_tok_s"] = rate("generation_tokens")
        if out["gen_tok_s"] is None:
            out["gen_tok_s"] = new.gauges.get("gen_throughput")
        out["prompt_tok_s"] = rate("prompt_tokens")

        base = self._base(self.window_s)
        for key in ("ttft", "itl"):
            h = new.histograms.get(key)
            if h is None or base is None:
                out[f"{key}_p50_s"] = None
                continue
            out[f"{key}_p50_s"] = histogram_quantile(0.5, bucket_delta(h, base.histograms.get(key)))

        def ratio(num: str, den: str) -> float | None:
            """Over the window when anything happened in it, else since the server started."""
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
            out["prefix_hit_rate"] = new.gauges.get("cache_hit_rate")
        out["spec_accept_rate"] = ratio("spec_accepted", "spec_draft_tokens")
        per_draft = ratio("spec_accepted", "spec_drafts")
        out["spec_mean_len"] = None if per_draft is None else 1.0 + per_draft
        if out["spec_accept_rate"] is None:
            out["spec_accept_rate"] = new.gauges.get("spec_accept_rate")
        if out["spec_mean_len"] is None:
            out["spec_mean_len"] = new.gauges.get("spec_accept_length")
        return out


# ---------------------------------------------------------------- the poller (I/O)


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

    async def poll_once(self, refresh: bool = False) -> ServingSnapshot:
        """One round; the model list and version are re-read every 15 rounds or on ``refresh``."""
        snap = self.snapshot
        now = time.time()
        health = await self.client.health()
        if not health.ok and health.status is None:  # no HTTP answer: skip the rest of the round
            self._rounds += 1
            self.snapshot = replace(snap, healthy=False, status="unreachable", error=health.error, polled_at=now)
            return self.snapshot
        # 503 with /metrics still answering: the values are fresh, the status says unhealthy
        status = "ok" if health.ok else "unhealthy"
        error = None
        updated: dict = {"note": snap.note if health.ok else health.error}
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
        try:
            text = await self.client.metrics_text()
            # in a thread: a hostile 8 MB body takes a second to parse, the UI loop must not wait
            sample = await asyncio.to_thread(parse_metrics, text, self.clock())
            self.tracker.add(sample)
            updated |= self.tracker.derive()
            updated["engine"] = sample.engine
            updated["updated_at"] = now
        except ApiError as exc:
            error = str(exc)
            if exc.kind in ("connect", "timeout"):
                status = "unreachable"
            elif exc.kind == "too-large":
                error = f"metrics too large (over {MAX_METRICS_BYTES // MIB} MB): not read"
        except Exception as exc:  # noqa: BLE001 - not Prometheus text: the parser may raise anything
            error = f"/metrics: cannot parse ({type(exc).__name__}: {str(exc)[:80]})"
        self._rounds += 1
        self.snapshot = replace(snap, healthy=health.ok, status=status, error=error, polled_at=now, **updated)
        return self.snapshot

    async def run(self) -> None:
        while True:
            try:
                self.post(await self.poll_once())
            except Exception as exc:  # noqa: BLE001 - the panel must keep updating, whatever broke
                self.snapshot = replace(self.snapshot, error=f"poll failed: {type(exc).__name__}: {exc}"[:200],
                                        polled_at=time.time())
                self.post(self.snapshot)
            await asyncio.sleep(self.interval_s)
