"""The hang evidence parsers on the published formats: ``ncclras`` text and ``-f json`` (NCCL's
src/ras/client_support.cc), PyTorch's flight recorder dump (FlightRecorder.cpp dump_json, and the
pickle read without importing anything), and the verdict of two RAS reads."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from console.probes import ParseError, ncclras
from console.probes import flight_recorder as fr

FIX = Path(__file__).parent.parent / "fixtures" / "hang"


def fixture(name: str) -> str:
    """The fixture without its citation header (lines starting with %, up to %%)."""
    text = (FIX / name).read_text()
    head, sep, body = text.partition("%%\n")
    assert sep and all(ln.startswith("%") for ln in head.splitlines()), f"{name}: no cited source header"
    return body


def station(rank: int) -> str:
    return "AB"[rank]


def test_text_mismatch_two_ranks_names_the_one_behind():
    rep = ncclras.parse_ras(fixture("ras_text_mismatch_2ranks.txt"))
    assert rep.format == "text" and rep.nccl_version == "2.28.9+cuda13.0"
    ranks = rep.ranks()
    assert ranks[0].counts == {"AllReduce": 6650} and ranks[1].counts == {"AllReduce": 6649}
    assert (ranks[1].pid, ranks[1].host) == (2811, "198.18.0.2")
    v = ncclras.verdict(rep, rep, 3.0, station)
    assert v.kind == "out-of-step" and v.behind == {1: 1}
    assert v.text.startswith("ranks out of step: A at op 6650, B at op 6649")
    assert "B 1 op behind" in v.text


def test_text_mismatch_32_ranks_lists_only_the_outliers_and_keeps_the_lead():
    rep = ncclras.parse_ras(fixture("ras_text_mismatch_32ranks.txt"))
    ranks = rep.ranks()
    assert sorted(ranks) == [24, 25, 26, 27, 28, 29] and all(r.counts == {"AllReduce": 6649} for r in ranks.values())
    assert rep.main().lead == {"AllReduce": 6650} and rep.main().size == 32
    v = ncclras.verdict(rep, rep, 3.0)
    assert v.kind == "out-of-step" and v.behind == {r: 1 for r in range(24, 30)}


def test_text_ok_is_in_step_without_counts():
    rep = ncclras.parse_ras(fixture("ras_text_ok.txt"))
    assert rep.comms and rep.comms[0].errors == () and rep.comms[0].status == "RUNNING"
    assert ncclras.verdict(rep, rep, 3.0).kind == "in-step"


def test_text_dead_names_the_missing_rank():
    rep = ncclras.parse_ras(fixture("ras_text_dead.txt"))
    assert rep.dead == ("Process 2811 on node 198.18.0.2 managing GPU 0",)
    assert [r.rank for r in rep.main().missing] == [1] and "INCOMPLETE" in rep.main().errors
    v = ncclras.verdict(rep, rep, 3.0, station)
    assert v.kind == "missing-ranks" and v.missing == (1,) and "B (not answering)" in v.text


def test_json_frozen_equal_and_moving():
    a = ncclras.parse_ras(fixture("ras_json_frozen_equal.json"))
    assert a.format == "json" and a.nccl_version == "2.28.9"
    assert a.ranks()[1].counts["AllReduce"] == 1842 and a.ranks()[1].ops == 1847
    v = ncclras.verdict(a, a, 3.0, station)
    assert v.kind == "frozen-equal" and "frozen over 3 s" in v.text and "stuck kernel or host" in v.text
    b = ncclras.parse_ras(fixture("ras_json_desync.json"))
    assert ncclras.verdict(a, b, 3.0, station).kind == "moving"


def test_json_desync_and_missing():
    d = ncclras.parse_ras(fixture("ras_json_desync.json"))
    v = ncclras.verdict(d, d, 2.0, station)
    assert v.kind == "out-of-step" and v.behind == {1: 1} and v.ops == {0: 6650, 1: 6649}
    m = ncclras.parse_ras(fixture("ras_json_missing.json"))
    assert m.dead == ("rank 1 (process 2811 on node 198.18.0.2)",)
    v = ncclras.verdict(m, m, 2.0, station)
    assert v.kind == "missing-ranks" and v.dead == (1,) and "B (dead)" in v.text


def test_unavailable_says_why():
    why = ncclras.unavailable(fixture("ras_connect_failed.txt"))
    assert why and "no RAS service" in why and "NCCL_RAS_ENABLE=0" in why
    assert ncclras.unavailable("Invalid format: json (must be text or json)") .startswith("this ncclras is older")
    assert ncclras.verdict(None, None, 3.0, why_absent=why).kind == "unavailable"
    with pytest.raises(ParseError):
        ncclras.parse_ras("hello")


def test_flight_recorder_json_names_the_rank_that_never_joined():
    a = fr.parse_dump(fixture("fr_rank0.json").encode(), 0)
    b = fr.parse_dump(fixture("fr_rank1.json").encode(), 1)
    assert (a.last().op, a.last().seq, a.last().state) == ("all_reduce", 1842, "started")
    assert a.pending().seq == 1842 and b.pending() is None
    assert a.pg_status["0"]["last_completed_collective"] == 1841
    v = fr.compare({"A": a, "B": b})
    assert v.kind == "rank-missing" and v.missing == {"B": "all_reduce SeqNum 1842"}
    assert v.text.startswith("flight recorder: A in all_reduce SeqNum 1842; B never entered it")


def test_flight_recorder_pickle_is_read_without_importing_anything():
    data = json.loads(fixture("fr_rank0.json"))
    got = fr.parse_dump(pickle.dumps(data, protocol=2), 0)
    assert got.last().seq == 1842

    class Evil:
        def __reduce__(self):
            import os
            return (os.system, ("echo pwned",))

    with pytest.raises(ParseError, match="refusing to load"):
        fr.parse_dump(pickle.dumps({"version": "2.7", "x": Evil()}, protocol=2))
    with pytest.raises(ParseError):
        fr.parse_dump(b"not a dump")


TIE = """
import json, sys
from console.probes import ncclras
doc = json.loads(sys.stdin.read())
for rank, n in ((0, 7), (1, 6)):  # two collectives apart by the same count on both ranks: a tie
    doc["communicators"][0]["ranks"][rank]["collective_counts"].update(Broadcast=n, AllGather=n)
rep = ncclras.parse_ras(json.dumps(doc))
v = ncclras.verdict(rep, rep, 3.0)
print(json.dumps([v.kind, v.collective, v.text]))
"""


def test_a_tie_between_collectives_is_judged_the_same_in_every_process():
    """The collectives are a set, whose order follows the process's string hashing: before, the same two
    reads named AllGather in one process and Broadcast in the next."""
    import os
    import subprocess
    import sys

    doc = fixture("ras_json_frozen_equal.json")
    seen = set()
    for seed in ("0", "1", "2", "3", "4", "5", "6", "7"):
        out = subprocess.run([sys.executable, "-c", TIE], input=doc, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        seen.add(out.stdout)
    assert len(seen) == 1
    kind, collective, text = json.loads(seen.pop())
    assert kind == "out-of-step" and collective == "AllGather" and "op" in text
