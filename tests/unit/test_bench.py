"""Pure parts of the benchmark: AIPerf's definitions on recorded timestamps, percentiles, prompt
files, concurrency parsing, the max-num-seqs warning, CSV/JSON output, CLI usage errors; the
concurrency a level reached, replies too short to time, the reference's comparability."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from console.cli import main
from console.config import parse_config
from console.serving.bench import load_prompts, parse_concurrency
from console.serving.bench_model import (
    MIN_TIMED_TOKENS,
    BenchReport,
    BenchSettings,
    RequestRecord,
    compare_to_reference,
    configured_max_num_seqs,
    generation_tokens,
    knee_of,
    max_num_seqs_warning,
    peak_in_flight,
    percentile,
    queue_warning,
    save_report,
    short_levels_warning,
    summarize,
    to_csv,
)
from console.serving.metrics import parse_metrics
from tests.two_stations import stations_toml

# Three requests at concurrency 2, times in seconds from the first request's start, as a stream
# would record them: start, first token chunk, last token chunk, end of stream; OSL from usage.
RECORDED = [
    RequestRecord(start=0.0, end=2.55, ttft_s=0.5, latency_s=2.5, output_tokens=101, chunks=101),
    RequestRecord(start=0.1, end=1.62, ttft_s=0.4, latency_s=1.6, output_tokens=61, chunks=31),
    RequestRecord(start=1.62, end=4.0, ttft_s=0.3, latency_s=2.3, output_tokens=201, chunks=101),
]


def test_definitions_reproduce_hand_computed_values():
    lv = summarize(2, RECORDED, server_tokens=363)
    # ITL = (latency - TTFT) / (OSL - 1): 2.0/100 = 20 ms, 1.2/60 = 20 ms, 2.0/200 = 10 ms
    assert [r.itl_s for r in RECORDED] == pytest.approx([0.020, 0.020, 0.010])
    assert lv.itl_ms_mean == pytest.approx((20 + 20 + 10) / 3)
    # per-user tok/s = mean of 1/ITL (not 1/mean ITL): (50 + 50 + 100) / 3
    assert lv.per_user_tok_s == pytest.approx(200 / 3)
    # total = all output tokens / (last response - first request) = 363 / 4.0
    assert lv.output_tokens == 363
    assert lv.duration_s == pytest.approx(4.0)
    assert lv.total_tok_s == pytest.approx(90.75)
    assert lv.ttft_ms_mean == pytest.approx(400.0)
    assert lv.ttft_ms_p50 == pytest.approx(400.0)
    assert lv.ttft_ms_p99 == pytest.approx(498.0)  # 400 + 0.98 * (500 - 400)
    assert lv.latency_s_mean == pytest.approx(6.4 / 3)
    assert lv.latency_s_p50 == pytest.approx(2.3)
    assert lv.tokens_per_chunk == pytest.approx(363 / 233)
    assert lv.errors == 0 and lv.requests == 3
    assert lv.server_tokens == 363 and lv.mismatch is False


def test_server_counter_disagreeing_is_a_mismatch():
    assert summarize(2, RECORDED, server_tokens=400).mismatch is True
    assert summarize(2, RECORDED, server_tokens=None).mismatch is False  # unknown is not a mismatch


def test_failed_requests_count_as_errors_and_stay_out_of_the_figures():
    failed = RequestRecord(start=0.05, end=9.0, ttft_s=None, latency_s=None, output_tokens=None,
                           error="stream: the server reported an error mid-stream: boom (code 500)")
    no_usage = RequestRecord(start=0.2, end=8.0, ttft_s=0.2, latency_s=1.0, output_tokens=None)
    lv = summarize(2, [*RECORDED, failed, no_usage])
    assert lv.errors == 2 and lv.requests == 5
    assert lv.output_tokens == 363
    assert lv.duration_s == pytest.approx(4.0)  # the failures' late ends do not stretch it
    assert lv.per_user_tok_s == pytest.approx(200 / 3)
    assert any("boom" in e for e in lv.error_samples)
    assert any("usage" in e for e in lv.error_samples)


def test_queue_warning_from_the_servers_peaks():
    queued = summarize(32, RECORDED, server_peaks={"running": 16.0, "waiting": 16.0})
    assert (queued.server_running_max, queued.server_waiting_max) == (16, 16)
    w = queue_warning(queued)
    assert w is not None and w.startswith("C32: the server ran at most 16 requests at once and queued up to 16")
    assert queue_warning(summarize(16, RECORDED, server_peaks={"running": 16.0, "waiting": 0.0})) is None
    assert queue_warning(summarize(16, RECORDED)) is None  # no /metrics gauges: nothing claimed


def test_generation_counter_from_real_metrics_text():
    vllm = Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu-metrics.txt"
    sample = parse_metrics(vllm.read_text())
    assert generation_tokens(sample) == int(sample.counters["generation_tokens"])
    # SGLang before its first request: gauges, no counter yet -> nothing generated
    fresh = parse_metrics("# TYPE sglang:num_running_reqs gauge\n"
                          'sglang:num_running_reqs{model_name="glm-5.3-flash"} 0.0\n')
    assert generation_tokens(fresh) == 0
    assert generation_tokens(parse_metrics("# TYPE up gauge\nup 1.0\n")) is None  # not an engine


def test_single_token_reply_has_no_itl_and_nothing_at_all_gives_none():
    one = RequestRecord(0.0, 0.5, 0.4, 0.4, 1, 1)
    assert one.itl_s is None
    lv = summarize(1, [one])
    assert lv.itl_ms_mean is None and lv.per_user_tok_s is None
    assert lv.total_tok_s == pytest.approx(2.0)
    empty = summarize(4, [])
    assert empty.total_tok_s is None and empty.output_tokens == 0 and empty.requests == 0


def test_percentile_is_numpy_linear():
    xs = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert percentile(xs, 50) == 35.0
    assert percentile(xs, 99) == pytest.approx(49.6)
    assert percentile(xs, 25) == 20.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_parse_concurrency():
    assert parse_concurrency("1,8,16,32") == (1, 8, 16, 32)
    assert parse_concurrency(" 4 , 2,4") == (4, 2)
    for bad in ("0", "1,x", "", "-2", "1.5", "99999"):
        with pytest.raises(ValueError, match="--concurrency"):
            parse_concurrency(bad)


def test_settings_default_to_nvidias_method():
    s = BenchSettings()
    assert s.concurrency == (1, 8, 16, 32) and s.max_tokens == 8192
    assert (s.warmup_for(16), s.measured_for(16)) == (48, 160)
    s2 = BenchSettings((2,), requests_per_level=5, warmup=0)
    assert (s2.warmup_for(2), s2.measured_for(2)) == (0, 5)
    with pytest.raises(ValueError):
        BenchSettings((1,), max_tokens=0)


def test_prompt_file_formats(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "write a sort"}\n\n{"texts": ["fix the bug"]}\n'
                 '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}\n')
    prompts = load_prompts(p)
    assert prompts[0] == ({"role": "user", "content": "write a sort"},)
    assert prompts[1] == ({"role": "user", "content": "fix the bug"},)
    assert prompts[2][0]["role"] == "system" and len(prompts[2]) == 2


@pytest.mark.parametrize("text, match", [
    ('{"prompt": "ok"}\nnot json\n', r"p.jsonl:2: not JSON"),
    ('{"question": "x"}\n', r"p.jsonl:1: expected an object"),
    ("\n\n", "no prompts"),
])
def test_bad_prompt_files_name_the_line(tmp_path, text, match):
    p = tmp_path / "p.jsonl"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_prompts(p)


CONFIG = """\
profile = "{profile}"
{overrides}
""" + stations_toml("127.0.0.1", "127.0.0.2", rail=False)


def test_max_num_seqs_from_profile_and_overrides():
    vllm = parse_config(CONFIG.format(profile="glm53-nvfp4-2x-gb300-vllm", overrides=""), "x.toml")
    assert configured_max_num_seqs(vllm) == 16  # the profile's
    raised = parse_config(CONFIG.format(profile="glm53-nvfp4-2x-gb300-vllm",
                                        overrides="[overrides]\nmax_num_seqs = 32\n"), "x.toml")
    assert configured_max_num_seqs(raised) == 32
    sglang = parse_config(CONFIG.format(profile="glm53-flash-nvfp4-2x-gb10-sglang", overrides=""), "x.toml")
    assert configured_max_num_seqs(sglang) == 2

    w = max_num_seqs_warning(16, (1, 8, 16, 32))
    assert w is not None and "--max-num-seqs 16" in w and "C32" in w
    assert max_num_seqs_warning(32, (1, 8, 16, 32)) is None
    assert max_num_seqs_warning(None, (64,)) is None
    assert "--max-running-requests 2" in max_num_seqs_warning(2, (1, 8), "sglang")


def test_csv_and_json_files(tmp_path):
    report = BenchReport("http://127.0.0.1:8000", "glm-5.3", BenchSettings((2,)))
    report.levels.append(summarize(2, RECORDED, server_tokens=363))
    report.records[2] = list(RECORDED)
    jpath, cpath = save_report(report, tmp_path / "out" / "run1.json")
    assert jpath.name == "run1.json" and cpath.name == "run1.csv"
    data = json.loads(jpath.read_text())
    level = data["levels"][0]
    for key in ("concurrency", "requests", "output_tokens", "total_tok_s", "per_user_tok_s", "ttft_ms_mean",
                "itl_ms_mean", "latency_s_mean", "errors", "server_tokens", "mismatch"):
        assert key in level
    assert level["total_tok_s"] == 90.75 and level["output_tokens"] == 363
    assert len(data["requests"]["2"]) == 3 and data["requests"]["2"][0]["output_tokens"] == 101
    rows = list(csv.DictReader(io.StringIO(cpath.read_text())))
    assert rows[0]["concurrency"] == "2" and float(rows[0]["per_user_tok_s"]) == pytest.approx(66.6667)
    assert to_csv([]).startswith("concurrency,requests,output_tokens,total_tok_s")


@pytest.mark.parametrize("argv, needle", [
    (["--concurrency", "1,zero"], "--concurrency"),
    (["--concurrency", "0"], "--concurrency"),
    (["--requests-per-level", "0"], "--requests-per-level"),
    (["--max-tokens", "-5"], "--max-tokens"),
    (["--warmup", "-1"], "--warmup"),
    (["--url", "127.0.0.1:8000"], "--url"),
])
def test_cli_usage_errors_are_one_line_exit_2(capsys, argv, needle):
    base = ["bench", "--url", "http://127.0.0.1:9"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_bad_prompt_file_exit_2(capsys, tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text("{nope\n")
    assert main(["bench", "--url", "http://127.0.0.1:9", "--prompts", str(p)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1: not JSON" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- what the figures may claim


def test_concurrency_reached_is_the_peak_of_requests_in_flight():
    assert peak_in_flight(RECORDED) == 2  # the third starts when the second ends
    lv = summarize(2, RECORDED)
    assert lv.concurrency_reached == 2 and lv.reached and lv.label == "C2" and lv.notes() == []
    # C4 with 2 requests (the issue's case): never 4 in flight, reported as such
    two = [RequestRecord(0.0, 3.0, 0.5, 3.0, 200, 200), RequestRecord(0.0, 2.0, 0.5, 2.0, 150, 150)]
    c4 = summarize(4, two)
    assert c4.concurrency_reached == 2 and not c4.reached and c4.label == "C4 (2 in flight)"
    assert any("at most 2 requests in flight (2 measured), so this level is not C4" in n for n in c4.notes())
    assert c4.to_json()["concurrency"] == 4 and c4.to_json()["concurrency_reached"] == 2
    # back-to-back requests (one ends as the next starts) are not two in flight
    chain = [RequestRecord(0.0, 1.0, 0.1, 1.0, 50, 50), RequestRecord(1.0, 2.0, 0.1, 1.0, 50, 50)]
    assert peak_in_flight(chain) == 1


def test_no_knee_from_a_level_that_never_reached_its_concurrency():
    def level(c: int, n: int, tokens: int) -> object:
        return summarize(c, [RequestRecord(0.0, 1.0, 0.1, 1.0, tokens, tokens)] * n)

    c1, c2 = level(1, 1, 100), level(2, 2, 100)
    c4_short = level(4, 2, 500)  # the most total tok/s, but only 2 in flight
    assert knee_of([c1, c2, c4_short]).concurrency == 2
    assert knee_of([c1, c4_short]) is None  # one level that reached its concurrency: no knee
    assert short_levels_warning(BenchSettings((1, 4, 8), requests_per_level=2)).startswith(
        "C4, C8: only 2 measured requests per level, so at most 2 in flight")
    assert short_levels_warning(BenchSettings((1, 8))) is None  # 10x by default


def test_a_short_or_burst_reply_gives_no_per_user_figure():
    # the issue's case: 9 tokens whose last 8 came in one burst 0.44 ms after the first
    burst = RequestRecord(0.0, 0.50044, 0.5, 0.50044, 9, 2)
    assert burst.itl_s == pytest.approx(0.000055) and not burst.timed  # 18,000 tok/s is the network
    lv = summarize(1, [burst])
    assert lv.per_user_tok_s is None and lv.itl_ms_mean is None and lv.timed_requests == 0
    assert lv.total_tok_s == pytest.approx(9 / 0.50044)  # what was delivered is still counted
    assert any("per-user tok/s not measured: no reply was long enough to time decoding (median 9 tokens"
               in n for n in lv.notes())
    # long enough in tokens but all of them at once: not timed either
    assert not RequestRecord(0.0, 0.504, 0.5, 0.504, 200, 3).timed
    # a mix: the figure comes from the timed replies only, and says so
    ok = RequestRecord(0.0, 2.5, 0.5, 2.5, 101, 101)
    mixed = summarize(2, [burst, ok])
    assert mixed.per_user_tok_s == pytest.approx(50.0) and mixed.timed_requests == 1
    assert any("from the longer replies only: 1 of 2 replies were not long enough" in n for n in mixed.notes())
    assert RequestRecord(0.0, 1.0, 0.1, 1.0, MIN_TIMED_TOKENS, 8).timed


NVIDIA = {"source": "NVIDIA, AIPerf 0.12.0", "prompts": "SPEED-Bench Coding", "max_tokens": 8192, "effort": "max"}


def test_the_reference_is_comparable_only_with_the_same_settings():
    # a 256-token run is not NVIDIA's 8,192-token run (the issue's case)
    c = compare_to_reference(BenchSettings(max_tokens=256), NVIDIA)
    assert c.verdict == "not comparable" and not c.comparable
    assert "max tokens 256 (reference 8,192)" in c.reasons
    assert "NOT COMPARABLE" in c.line() and "SPEED-Bench Coding, 8,192-token cap, reasoning max" in c.line()
    for settings, needle in ((BenchSettings(ignore_eos=True), "fixed-length"),
                             (BenchSettings(effort="low"), "reasoning effort low (reference max)")):
        c = compare_to_reference(settings, NVIDIA)
        assert c.verdict == "not comparable" and any(needle in r for r in c.reasons)
    # the same settings on our own prompts: indicative (MTP's speed-up depends on the prompts)
    c = compare_to_reference(BenchSettings(), NVIDIA)
    assert c.verdict == "indicative" and c.comparable
    assert c.reasons == ("built-in coding prompts, not SPEED-Bench Coding",)
    c = compare_to_reference(BenchSettings(effort="max"), NVIDIA, "/data/speed-bench-coding.jsonl")
    assert c.verdict == "indicative" and c.reasons == ("prompts from speed-bench-coding.jsonl, not SPEED-Bench Coding",)
    # a reference whose cap and prompts are unknown is at best indicative
    c = compare_to_reference(BenchSettings(max_tokens=256), {"source": "community report"})
    assert c.verdict == "indicative" and all("not published" in r for r in c.reasons)
    # a baseline of one's own, measured with the same settings and prompts: comparable
    assert compare_to_reference(BenchSettings(), {"max_tokens": 8192, "prompts": "built-in"}).verdict == "comparable"
    assert compare_to_reference(BenchSettings(), {"max_tokens": 8192, "prompts": "mine.jsonl"},
                                "/x/mine.jsonl").line().endswith("comparable settings")


def test_the_profiles_say_how_their_reference_was_measured():
    from console.config import load_profile

    p = load_profile("glm53-nvfp4-2x-gb300-vllm")
    assert p.reference_method == NVIDIA
    assert load_profile("glm53-flash-nvfp4-2x-gb10-sglang").reference_method["source"].startswith("community")


def test_cli_table_leaves_a_non_comparable_reference_out(capsys):
    from console.commands.bench import print_table
    from console.config import BenchRow

    report = BenchReport("http://127.0.0.1:8000", "glm-5.3", BenchSettings((2,), max_tokens=256))
    report.levels.append(summarize(2, RECORDED, server_tokens=363))
    ref = {2: BenchRow(2, 200.0, 80.0)}
    out = io.StringIO()
    print_table(report, ref, out, compare_to_reference(report.settings, NVIDIA))
    text = out.getvalue()
    assert "reference (total / per-user)" not in text and "200.0 / 80.0" not in text
    assert "NOT COMPARABLE: max tokens 256 (reference 8,192)" in text and "not printed beside" in text
    out = io.StringIO()
    print_table(report, ref, out, compare_to_reference(BenchSettings((2,)), NVIDIA))
    assert "200.0 / 80.0" in out.getvalue() and "INDICATIVE" in out.getvalue()
    four = BenchReport("u", "m", BenchSettings((4,), requests_per_level=2))
    four.levels.append(summarize(4, [RequestRecord(0.0, 0.50044, 0.5, 0.50044, 9, 2)] * 2))
    out = io.StringIO()
    print_table(four, {}, out)
    row = out.getvalue().splitlines()[1].split()
    assert row[0] == "4>2" and row[2] == "n/m"


def test_bench_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "dgx-console bench" not in out.split("usage:")[1].split("\n\n", 1)[1][:20]
    assert "per-user tok/s = 1/ITL" in out and '{"prompt": ...}' in out
