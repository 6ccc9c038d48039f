"""Non-finite numbers stop at the parser that reads them: Prometheus' NaN is "no value" (None), a
number the server sent out of range is ``INVALID`` (shown "invalid"; ``known`` makes it None for a
reader that needs a count), and an incident bundle's NaN/Infinity/1e400 is read as None."""

from __future__ import annotations

import io
import json
import math
import tarfile

from console.incidents.replay import read_window
from console.incidents.window import Window
from console.serving.metrics import INVALID, MetricsTracker, ServingSnapshot, is_invalid, known, parse_metrics
from console.station.messages import ServingUpdate
from console.station.progress_facts import ProgressFacts


def test_nan_in_metrics_is_none_not_nan():
    t = MetricsTracker()
    t.add(parse_metrics("vllm:num_requests_running NaN\nvllm:num_requests_waiting 3\n", t=1.0))
    d = t.derive()
    assert d["running"] is None and d["waiting"] == 3  # no NaN leaves the parser for "no value"


def test_infinite_gauge_is_invalid_and_known_makes_it_none():
    t = MetricsTracker()
    t.add(parse_metrics("vllm:num_requests_running +Inf\nvllm:num_requests_waiting 3\n", t=1.0))
    running = t.derive()["running"]
    assert is_invalid(running) and known(running) is None
    assert known(2.0) == 2.0 and known(None) is None and not is_invalid(None) and not is_invalid(0.0)


def test_invalid_counter_is_no_count_for_progress():
    facts = ProgressFacts()
    facts.serving(ServingSnapshot(gen_tokens_total=INVALID, updated_at=10.0))
    assert facts.tokens is None and facts.tokens_moved_at is None
    facts.serving(ServingSnapshot(gen_tokens_total=5.0, updated_at=11.0))
    assert facts.tokens == 5.0


def test_window_records_invalid_as_null():
    w = Window()
    w.note(ServingUpdate(ServingSnapshot(running=INVALID, waiting=2.0, updated_at=100.0), at=100.0), head="h")
    (line,) = w.lines(0)
    body = json.loads(line)
    assert body["running"] is None and body["waiting"] == 2.0


def test_bundle_reader_maps_non_finite_to_none(tmp_path):
    lines = ['{"station": "s1", "t": 1.0, "kind": "serving", "running": NaN, "waiting": Infinity, '
             '"gen_tokens": 1e400, "gen_tok_s": 2.5}',
             '{"station": "s1", "t": NaN, "kind": "serving"}']  # no time: not a sample
    data = "\n".join(lines).encode()
    path = tmp_path / "b.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("incident/window.ndjson")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    samples, _ = read_window(str(path))
    assert len(samples) == 1
    s = samples[0]
    assert s["running"] is None and s["waiting"] is None and s["gen_tokens"] is None and s["gen_tok_s"] == 2.5
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in s.values())
