"""The SLO arithmetic of the benchmark (pure): order-statistic intervals of percentiles, SLO names
of AIPerf and vLLM, goodput per request, the one line with the largest concurrency within the SLO."""

from __future__ import annotations

import random

import pytest

from console.serving.bench_model import RequestRecord, summarize
from console.serving.bench_stats import goodput, meets, parse_slo, percentile_ci, slo_answer


def test_the_median_interval_of_100_is_the_textbook_one():
    xs = list(range(1, 101))
    assert percentile_ci(xs, 50) == (40, 61)  # ranks 40..61, the tables' 95% interval for n=100
    assert percentile_ci(xs, 99)[1] is None  # 100 requests cannot bound a p99 from above
    assert percentile_ci([], 50) == (None, None) and percentile_ci([1.0, 2.0, 3.0], 50) == (None, None)


def test_the_interval_covers_at_least_95_percent():
    rng = random.Random(7)
    hits = 0
    for _ in range(400):
        lo, hi = percentile_ci([rng.random() for _ in range(60)], 90)
        hits += lo is not None and hi is not None and lo <= 0.9 <= hi
    assert hits / 400 >= 0.93  # exact binomial ranks: at least 95% in expectation


def test_aiperf_and_vllm_names_mean_the_same_metrics():
    a = parse_slo(["time_to_first_token:500", "inter_token_latency:50", "request_latency:9000"])
    v = parse_slo(["ttft:500ms", "TPOT:50", "e2el:9000"])
    assert a.objectives == v.objectives == (("ttft", 500.0), ("itl", 50.0), ("latency", 9000.0))
    assert parse_slo([]) is None


@pytest.mark.parametrize("items, needle", [(["itl:5"], "expected NAME:MS"), (["ttft=5"], "expected NAME:MS"),
                                           (["ttft:0"], "more than 0"), (["ttft:x"], "not a number"),
                                           (["ttft:1", "time_to_first_token:2"], "already limited")])
def test_bad_slo_items_are_one_line(items, needle):
    with pytest.raises(ValueError, match=needle):
        parse_slo(items)


def test_a_request_meets_every_objective_or_none():
    slo = parse_slo(["ttft:500", "tpot:20", "e2el:3000"])
    fast = RequestRecord(0.0, 2.0, 0.4, 2.0, 101, 101)  # ITL (2.0-0.4)/100 = 16 ms
    slow_ttft = RequestRecord(0.0, 2.0, 0.6, 2.0, 101, 101)
    slow_itl = RequestRecord(0.0, 3.0, 0.4, 2.9, 101, 101)  # 25 ms
    one_token = RequestRecord(0.0, 0.3, 0.3, 0.3, 1, 1)  # no gap: meets the ITL objective (vLLM's rule)
    failed = RequestRecord(0.0, 1.0, None, None, None, error="http: 500")
    assert [meets(r, slo) for r in (fast, slow_ttft, slow_itl, one_token, failed)] == [True, False, False, True, False]
    g = goodput([fast, slow_ttft, slow_itl, one_token, failed], slo, duration_s=2.0)
    assert (g.met, g.pct, g.per_s) == (2, 40.0, 1.0)


def test_the_line_names_the_largest_level_within_the_slo():
    slo = parse_slo(["e2el:1000"], target_pct=75)

    def level(c: int, lat: float):
        recs = [RequestRecord(0.0, x, 0.1, x, 50, 50) for x in (lat, lat, lat, 5.0)]  # one in four is slow
        return summarize(c, [RequestRecord(r.start, r.end, r.ttft_s, r.latency_s, r.output_tokens, r.chunks)
                             for r in recs] * c, slo=slo)

    levels = [level(1, 0.5), level(2, 0.8), level(4, 1.5)]
    ans = slo_answer(levels, slo)["answers"][0]
    assert ans["max_concurrency"] == 2 and ans["goodput_pct"] == 75.0
    assert ans["line"].startswith("within SLO (e2el <= 1000 ms; 75% of requests): up to C2 users")
    assert "(C4: 0%)" in ans["line"]
    none = slo_answer([level(4, 1.5)], slo)["answers"][0]
    assert none["max_concurrency"] is None and "NO level" in none["line"]


def test_decode_floor_zero_times_every_reply():
    burst = RequestRecord(0.0, 0.50044, 0.5, 0.50044, 9, 2)
    assert summarize(1, [burst]).timed_requests == 0
    assert summarize(1, [burst], decode_floor_tokens=0).timed_requests == 1
