"""The simulated server's scheduler and its ``/metrics``: at most ``max_num_seqs`` requests at once
(the rest wait), each user slower as more run, MTP steps that emit several tokens, the prefix cache, and
the engine's own metric names (vLLM's or SGLang's) written by prometheus_client as the engines do.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from console.sim.replies import count_tokens

# Bucket bounds as vLLM 0.32 exposes them (tests/fixtures/vllm-0.32-cpu-metrics.txt).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
               240.0, 480.0, 960.0, 1920.0, 7680.0)
CONCURRENCY_SLOWDOWN = 0.1  # per-user rate = tokens_per_s / (1 + 0.1 * (running - 1)): 115 -> ~46 at 16
MTP_ACCEPT = (0.8, 0.55, 0.35, 0.2)  # per-position acceptance, conditional on the previous ones


def _spec_tokens(backend: Any) -> int:
    """Draft tokens per step when the backend runs MTP (profile ``speculative_config``)."""
    n = getattr(backend, "num_speculative_tokens", None)
    if n is not None:
        return int(n)
    try:
        spec = backend.world.profile.serving.get("speculative_config")
    except AttributeError:
        return 0
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            return 0
    return int((spec or {}).get("num_speculative_tokens", 0)) if isinstance(spec, dict) else 0


@dataclass
class LiveRequest:
    """One request being served: its prompt and the tokens generated so far (what it holds of the KV cache)."""

    prompt_tokens: int
    generated: int = 0


@dataclass
class Scheduler:
    """Scheduler state and metrics shared by the requests of one simulated server."""

    backend: Any
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    live: dict[str, LiveRequest] = field(default_factory=dict)
    waiting: int = 0
    seen_prefixes: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        b = self.backend
        self.slots = asyncio.Semaphore(max(1, int(b.max_num_seqs)))
        self.spec_k = _spec_tokens(b)
        self.kv_tokens = int(getattr(b, "kv_cache_tokens", 0) or max(4096, int(b.max_model_len) * 2))
        self.sglang = b.engine == "sglang"
        p = "sglang:" if self.sglang else "vllm:"
        lbl = ["model_name"] if self.sglang else ["engine", "model_name"]
        self.lv = [b.model] if self.sglang else ["0", b.model]
        r = self.registry
        if self.sglang:
            self.g_running = Gauge(p + "num_running_reqs", "The number of running requests.", lbl, registry=r)
            self.g_waiting = Gauge(p + "num_queue_reqs", "The number of requests in the waiting queue.", lbl,
                                   registry=r)
            self.g_kv = Gauge(p + "token_usage", "The token usage.", lbl, registry=r)
            self.g_gen = Gauge(p + "gen_throughput", "The generation throughput (token/s).", lbl, registry=r)
            self.g_hit = Gauge(p + "cache_hit_rate", "The prefix cache hit rate.", lbl, registry=r)
            self.g_acc_len = Gauge(p + "spec_accept_length", "The average acceptance length of speculative "
                                   "decoding.", lbl, registry=r)
            self.g_acc_rate = Gauge(p + "spec_accept_rate", "The average acceptance rate of speculative "
                                    "decoding.", lbl, registry=r)
            self.c_requests = Counter(p + "num_requests", "Number of requests processed.", lbl, registry=r)
        else:
            self.g_running = Gauge(p + "num_requests_running", "Number of requests in model execution batches.",
                                   lbl, registry=r)
            self.g_waiting = Gauge(p + "num_requests_waiting", "Number of requests waiting to be processed.",
                                   lbl, registry=r)
            self.g_kv = Gauge(p + "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lbl,
                              registry=r)
            self.c_queries = Counter(p + "prefix_cache_queries", "Prefix cache queries, in terms of number of "
                                     "queried tokens.", lbl, registry=r)
            self.c_hits = Counter(p + "prefix_cache_hits", "Prefix cache hits, in terms of number of cached "
                                  "tokens.", lbl, registry=r)
            self.c_preempt = Counter(p + "num_preemptions", "Cumulative number of preemption from the engine.",
                                     lbl, registry=r)
            self.c_success = Counter(p + "request_success", "Count of successfully processed requests.",
                                     lbl + ["finished_reason"], registry=r)
            if self.spec_k:
                self.c_drafts = Counter(p + "spec_decode_num_drafts", "Number of spec decoding drafts.", lbl,
                                        registry=r)
                self.c_draft_tokens = Counter(p + "spec_decode_num_draft_tokens", "Number of draft tokens.",
                                              lbl, registry=r)
                self.c_accepted = Counter(p + "spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                          lbl, registry=r)
                self.c_accepted_pos = Counter(p + "spec_decode_num_accepted_tokens_per_pos",
                                              "Accepted tokens per draft position.", lbl + ["position"],
                                              registry=r)
        self.c_prompt = Counter(p + "prompt_tokens", "Number of prefill tokens processed.", lbl, registry=r)
        self.c_gen = Counter(p + "generation_tokens", "Number of generation tokens processed.", lbl, registry=r)
        self.h_ttft = Histogram(p + "time_to_first_token_seconds", "Histogram of time to first token in "
                                "seconds.", lbl, buckets=TTFT_BUCKETS, registry=r)
        self.h_itl = Histogram(p + "inter_token_latency_seconds", "Histogram of inter-token latency in "
                               "seconds.", lbl, buckets=ITL_BUCKETS, registry=r)
        self.h_e2e = Histogram(p + "e2e_request_latency_seconds", "Histogram of e2e request latency in "
                               "seconds.", lbl, buckets=E2E_BUCKETS, registry=r)
        for m in (self.c_prompt, self.c_gen, self.h_ttft, self.h_itl, self.h_e2e):
            m.labels(*self.lv)  # exposed at zero from the start, as vLLM does
        if not self.sglang:
            for m in (self.c_queries, self.c_hits, self.c_preempt):
                m.labels(*self.lv)
            if self.spec_k:
                for m in (self.c_drafts, self.c_draft_tokens, self.c_accepted):
                    m.labels(*self.lv)
        self._spec_drafts = 0
        self._spec_accepted = 0
        self._gen_window: list[tuple[float, int]] = []
        self._bg_tokens = 0  # the background users' tokens already counted (the wedge fault's)
        self.refresh()

    def refresh(self, load: tuple[int, float, bool] | None = None) -> None:
        """The gauges now; ``load``: the wedge fault's users (running, tokens so far, wedged)."""
        self.g_running.labels(*self.lv).set(len(self.live) + (load[0] if load else 0))
        if load is not None and (gained := int(load[1]) - self._bg_tokens) > 0:
            self.generated(gained)
            self._bg_tokens += gained
        self.g_waiting.labels(*self.lv).set(self.waiting)
        used = sum(x.prompt_tokens + x.generated for x in self.live.values())
        self.g_kv.labels(*self.lv).set(min(1.0, used / self.kv_tokens))
        if self.sglang:
            now = time.monotonic()
            self._gen_window = [(t, n) for t, n in self._gen_window if t > now - 5.0]
            self.g_gen.labels(*self.lv).set(sum(n for _, n in self._gen_window) / 5.0)

    def per_user_rate(self) -> float:
        n = max(1, len(self.live))
        return float(self.backend.tokens_per_s) / (1.0 + CONCURRENCY_SLOWDOWN * (n - 1))

    def prefix(self, messages: list[Any], prompt_tokens: int) -> int:
        """Tokens of this prompt already cached: whole earlier messages seen before (chat history)."""
        hits = 0
        acc = 0
        matching = True
        for m in messages:
            acc = zlib.crc32(json.dumps(m, sort_keys=True).encode(), acc)
            matching = matching and acc in self.seen_prefixes
            if matching:
                hits += count_tokens([m])
            self.seen_prefixes.add(acc)
        return min(hits, prompt_tokens)

    def generated(self, n: int) -> None:
        self.c_gen.labels(*self.lv).inc(n)
        if self.sglang:
            self._gen_window.append((time.monotonic(), n))

    def step_tokens(self, rng: random.Random, cap: int) -> int:
        """Tokens one decode step emits (at most ``cap``): 1 + accepted MTP drafts, counted."""
        if not self.spec_k or cap <= 0:
            return min(1, cap)
        accepted = 0
        for _ in range(min(self.spec_k, cap - 1)):
            if rng.random() >= MTP_ACCEPT[min(accepted, len(MTP_ACCEPT) - 1)]:
                break
            accepted += 1
        self._spec_drafts += 1
        self._spec_accepted += accepted
        if self.sglang:
            self.g_acc_len.labels(*self.lv).set(1 + self._spec_accepted / self._spec_drafts)
            self.g_acc_rate.labels(*self.lv).set(self._spec_accepted / (self._spec_drafts * self.spec_k))
        else:
            self.c_drafts.labels(*self.lv).inc()
            self.c_draft_tokens.labels(*self.lv).inc(self.spec_k)
            self.c_accepted.labels(*self.lv).inc(accepted)
            for pos in range(accepted):
                self.c_accepted_pos.labels(*self.lv, str(pos)).inc()
        return 1 + accepted

    def finished(self, reason: str) -> None:
        if self.sglang:
            self.c_requests.labels(*self.lv).inc()
        else:
            self.c_success.labels(*self.lv, reason).inc()
