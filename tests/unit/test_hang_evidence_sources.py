"""One station's hang evidence, source by source: a dump path that is a symlink is not followed (nor
archived), a bad source is that source's one line, one RAS read is one read, the counter rate uses
the time measured between the reads, and the archive masks secret keys as well as values."""

from __future__ import annotations

import os
import pickle
import shlex
import subprocess

from console.commands.hang_report import members
from console.doctor import evidence
from console.doctor.evidence import HangEvidence, StationEvidence
from console.doctor.verdict import judge
from console.remote import cmdlines as rc
from tests.ui.pair_app import pair_config
from tests.unit.test_probes_hang import fixture


def test_a_symlinked_dump_is_not_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("ssh-private-key-material")
    (tmp_path / "fr_dump_0").symlink_to(secret)
    (tmp_path / "fr_dump_1").write_bytes(pickle.dumps({"version": "2.4", "entries": []}, 2))
    script = shlex.split(rc.flight_recorder_dump("glm53"))[-1]  # what runs inside the container
    env = {**os.environ, "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_dump_"), "TORCH_NCCL_TRACE_BUFFER_SIZE": "1"}
    out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30).stdout
    assert f"=== FR-SYMLINK {tmp_path}/fr_dump_0" in out and "=== FR " + str(tmp_path / "fr_dump_1") in out
    ev = StationEvidence("A")
    evidence._flight_recorder(ev, out)
    assert "a symlink, not followed" in "; ".join(ev.flight_recorder["errors"])
    assert b"ssh-private" not in ev.raw["flight_recorder.txt"].encode()
    assert len(ev.fr_dumps) == 1


def test_a_bad_source_is_its_own_line():
    ev = StationEvidence("A")
    evidence._pyspy(ev, "Process " + "9" * 5000 + ": x\n" + "    " + "a (" * 1000)
    evidence._flight_recorder(ev, "=== FR /tmp/fr_dump_0 1\n" + "gARLAS4=\n")  # a pickle of 1, not a dict
    evidence._ras_read(ev, '{"communicators": [{"size": NaN}]}', 1)
    evidence._gpus(ev, "nan, inf, " + "9" * 400)
    assert ev.flight_recorder["status"] == "error" and "not a dict" in ev.flight_recorder["note"]
    assert ev.ras["status"] == "unavailable" and ev.ras_reads.state == "not-read"
    assert ev.pyspy["status"] in ("error", "ok")


def _running(name: str) -> StationEvidence:
    ev = StationEvidence(name)
    ev.container = {"name": "glm53", "state": "running"}
    return ev


def test_one_ras_read_is_never_called_frozen():
    evs = {"A": _running("A"), "B": _running("B")}
    evidence._ras_read(evs["A"], fixture("ras_json_frozen_equal.json"), 1)
    evs["A"].ras_reads.why_not = "no second read: cut by the deadline (5 s)"
    verdict, findings = judge(pair_config(), evs, 3.0)
    assert "frozen" not in findings["ras"] and "one read" in findings["ras"], findings["ras"]
    assert "cut by the deadline" in findings["ras"]
    assert "stuck kernel" not in verdict


def test_counter_rate_uses_the_measured_time_and_kernel_clean_only_where_read():
    ev = _running("A")
    ev.counter_reads.first = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 0}}, "ev": []}
    ev.counter_reads.second = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 36 * 10**9}}, "ev": []}
    ev.counter_reads.first_at, ev.counter_reads.second_at = 100.0, 110.0  # a slow station: 10 s, not the nominal 3
    evidence._counters(ev, 3.0)
    assert ev.counters["interval_s"] == 10.0
    ev.kernel = {"status": "ok", "events": []}
    b = _running("B")
    b.kernel = {"status": "not-read", "note": "not read: no answer within 5 s", "events": []}
    _verdict, findings, covers, nxt = judge(pair_config(), {"A": ev, "B": b}, 3.0, True)
    assert "28.8 Gb/s" in findings["counters"], findings["counters"]  # 36 GB in 10 s, not in 3 s (96 Gb/s)
    assert "kernel logs clean" not in findings["kernel"] and "B: not read" in findings["kernel"]
    assert "A: clean" in findings["kernel"]
    assert covers["kernel"].stations == ("A",) and covers["kernel"].not_read == ("B",)
    assert nxt


def test_the_archive_masks_secret_keys_as_well_as_values():
    ev = _running("A")
    ev.counters = {"status": "ok", "retries_rising": {"HF_TOKEN=hf_abcdefghijklmnop12345": 3, "API_KEY": "x"}}
    ev.ras = {"status": "ok", "api_key": "sk-live-abcdefghijklmnop"}
    from console.config import masker
    from console.diagnosis import redact

    mask = masker(pair_config())
    files = members(HangEvidence({"A": ev}, "v", {"ras": "x"}, 0.0, 1.0, 3.0, True), lambda t: redact(mask(t)))
    blob = files["evidence.json"]
    assert b"hf_abcdefghijklmnop12345" not in blob and b"sk-live-abcdefghijklmnop" not in blob
