"""Every parser of hang evidence is bounded and total: hostile flight recorder dumps (pickle and JSON),
NCCL RAS reports (text and -f json) and py-spy output either parse into checked values or raise the
one ParseError -- never another exception, never a walk exponential in the input, never NaN/inf/huge
numbers in what comes out."""

from __future__ import annotations

import json
import math
import pickle
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.probes import ParseError, ncclras, pyspy, safe_pickle
from console.probes import flight_recorder as fr

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ODD = st.sampled_from([float("nan"), float("inf"), -1, -(2**70), 2**70, 10**400, "1e999", None, [], {}, True,
                       "x" * 5000, 1.5, "", "757"])


def _nums_ok(dump: fr.FrDump) -> None:
    for e in dump.entries:
        for v in (e.record_id, e.pg_id, e.seq):
            assert isinstance(v, int) and 0 <= v < 2**63
        assert e.timeout_ms is None or 0 < e.timeout_ms < 2**63
        assert len(e.op) <= 200 and len(e.state) <= 200 and len(e.pg_name) <= 200


# ------------------------------------------------------------------ flight recorder


def _dag_tuple_key(depth: int) -> bytes:
    """A dict keyed by a tuple of tuples shared through the memo: hashing it walks 2**depth paths."""
    ops = bytearray(b"\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01X\x03\x00\x00\x002.4q\x02X\x07\x00\x00\x00"
                    b"entriesq\x03]q\x04}q\x05X\x02\x00\x00\x00pgq\x06}q\x07)")
    ops += b"q\x08h\x08\x86" * depth + b"K\x01s" + b"sas."
    return bytes(ops)


def test_a_small_memo_shared_dump_is_refused_at_once():
    data = _dag_tuple_key(60)
    assert len(data) < 600
    t0 = time.process_time()
    try:
        fr.parse_dump(data)
        raise AssertionError("a tuple key was read")
    except ParseError as exc:
        assert "only scalars" in str(exc)
    assert time.process_time() - t0 < 5  # a guard against the exponential walk, not a timing figure


def test_a_shared_list_dag_parses_without_walking_it():
    t: list = []
    for _ in range(60):
        t = [t, t]
    data = pickle.dumps({"version": "2.4", "entries": [{"process_group": t, "profiling_name": t, "state": t}]}, 2)
    d = fr.parse_dump(data)
    assert d.entries[0].pg_name == "" and d.entries[0].op == "" and d.entries[0].state == ""


def test_a_self_containing_list_is_data_not_a_loop():
    x: list = []
    x.append(x)
    d = fr.parse_dump(pickle.dumps({"version": "2.4", "entries": [{"process_group": x}], "pg_status": {"0": x}}, 2))
    assert d.entries[0].pg_name == "" and d.pg_status == {}


def test_the_allowed_global_cannot_set_attributes_on_our_code():
    build = b"\x80\x02ctorch.jit._pickle\nrestore_type_tag\n}X\x01\x00\x00\x00aK\x01sb."
    try:
        fr.restricted_loads(build)
        raise AssertionError("BUILD ran")
    except ParseError as exc:
        assert "BUILD" in str(exc)
    assert not hasattr(safe_pickle, "a") and not hasattr(fr, "a")


def test_classes_and_functions_are_refused():
    for obj in (time.time, ParseError("x"), {1, 2}.__class__):
        try:
            fr.restricted_loads(pickle.dumps(obj, 2))
            raise AssertionError(f"{obj!r} loaded")
        except ParseError:
            pass


def test_torchscript_list_helpers_still_read(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("tjp")

    def build_intlist(x):
        return x

    build_intlist.__module__, build_intlist.__qualname__ = "tjp", "build_intlist"
    mod.build_intlist = build_intlist
    monkeypatch.setitem(sys.modules, "tjp", mod)

    class IntList:
        def __reduce__(self):
            return (build_intlist, ([1, 2],))

    data = pickle.dumps({"version": "2.4", "entries": [{"collective_seq_id": 7, "input_sizes": IntList()}]}, 2)
    data = data.replace(b"ctjp\n", b"ctorch.jit._pickle\n")  # as TorchScript's pickler names it
    d = fr.parse_dump(data)
    assert d.entries[0].seq == 7


@FAST
@given(st.lists(st.dictionaries(st.sampled_from(["record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "state",
                                                 "profiling_name", "is_p2p", "timeout_ms", "process_group"]),
                                ODD, max_size=9), max_size=5), ODD)
def test_dump_fields_of_any_type_or_range(entries, version):
    data = {"version": version, "entries": entries, "pg_status": {"0": {"last_completed_collective": version}}}
    for raw in (pickle.dumps(data, 2), pickle.dumps(data, 5)):
        try:
            d = fr.parse_dump(raw)
        except ParseError:
            continue
        _nums_ok(d)
        fr.compare({"A": d, "B": d})


@FAST
@given(st.binary(max_size=400))
def test_random_bytes_as_a_pickle_never_escape(blob):
    try:
        fr.parse_dump(b"\x80\x02" + blob)
    except ParseError:
        pass


def test_json_dumps_with_hostile_numbers_and_nesting():
    for text in ('{"version": "2", "entries": [{"collective_seq_id": 1e999}]}',
                 '{"version": NaN, "entries": []}',
                 '{"version": "2", "entries": [{"collective_seq_id": ' + "9" * 500 + '}]}',
                 '{"version": "2", "entries": ' + "[" * 100_000 + "]" * 100_000 + "}",
                 '{"version": "2", "entries": {"a": 1}}'):
        try:
            _nums_ok(fr.parse_dump(text.encode()))
        except ParseError:
            pass
    d = fr.parse_dump(b'{"version": "2.4", "entries": [{"collective_seq_id": -5, "state": "started"}]}')
    assert d.entries[0].seq == 0


# ------------------------------------------------------------------ RAS


def _ras_ok(rep: ncclras.RasReport) -> None:
    for c in rep.comms:
        for r in c.ranks + c.missing:
            assert 0 <= r.rank <= ncclras.MAX_RANK
            assert all(isinstance(v, int) and 0 <= v < 2**63 for v in r.counts.values())
            assert r.pid is None or (isinstance(r.pid, int) and r.pid >= 0)
        assert c.size is None or 0 <= c.size <= ncclras.MAX_RANK
    json.dumps([r.counts for c in rep.comms for r in c.ranks], allow_nan=False)


RANK = st.fixed_dictionaries({}, optional={"rank": ODD, "host": ODD, "pid": ODD, "cuda_dev": ODD, "status": st.one_of(
    ODD, st.fixed_dictionaries({}, optional={"abort_flag": ODD, "unresponsive": ODD, "considered_dead": ODD})),
    "collective_counts": st.one_of(ODD, st.dictionaries(st.sampled_from(["AllReduce", "Broadcast"]), ODD))})


@FAST
@given(st.lists(st.fixed_dictionaries({}, optional={"hash": ODD, "size": ODD, "ranks": st.one_of(ODD, st.lists(RANK)),
                                                    "missing_ranks": st.one_of(ODD, st.lists(RANK))}), max_size=3),
       ODD)
def test_ras_json_of_any_type_or_range(comms, version):
    try:
        text = json.dumps({"nccl_version": version, "communicators": comms})
    except ValueError:
        return
    try:
        rep = ncclras.parse_ras(text)
    except ParseError:
        return
    _ras_ok(rep)
    v = ncclras.verdict(rep, rep, 3.0)
    assert v.kind and v.text


def test_ras_json_tokens_json_refuses():
    for text in ('{"communicators": [{"ranks": [{"rank": 0, "collective_counts": {"AllReduce": NaN}}]}]}',
                 '{"communicators": [{"size": Infinity}]}',
                 '{"communicators": [{"size": 1e999}]}',
                 '{"communicators": ' + "[" * 50_000 + "]" * 50_000 + "}",
                 '{"communicators": [{"ranks": [{"rank": ' + "1" * 5000 + "}]}]}"):
        try:
            _ras_ok(ncclras.parse_ras(text))
        except ParseError:
            pass


TEXT_LINES = st.sampled_from([
    "NCCL version 2.28.9+cuda13.0", "Job summary", "Errors", "Warnings", "INCOMPLETE", "DEAD",
    "Group     Comms     Nodes     Ranks     Ranks     Ranks     Status  Errors",
    "    0         1         2         2         2         2    RUNNING  MISMATCH",
    "    0         1         2    " + "9" * 400 + "         2         2    RUNNING  OK",
    "#0-0 (9a6b5c4d3e2f1a0b) MISMATCH", "#0-0 (9a6b5c4d3e2f1a0b) INCOMPLETE",
    "  Communicator ranks have different AllReduce operation counts",
    "  1 ranks have launched up to operation 6650",
    "  1 ranks have launched up to operation " + "9" * 500,
    "  Rank 1 has launched up to operation 6649 -- GPU 0 managed by process 2811 on node 198.18.0.2",
    "  Rank " + "7" * 300 + " has launched up to operation 1 -- GPU 0 managed by process 1 on node h",
    "  Rank 0 has launched up to operation 5 -- GPU 0 managed by process " + "9" * 600 + " on node h",
    "  Rank 0 has status ABORT -- GPU 0 managed by process 1 on node h",
    "  Process 2757 on node 198.18.0.2 managing GPU 0", "  Rank 0 -- [process information not found]",
    "x" * 10_000, ""])


@FAST
@given(st.lists(TEXT_LINES, max_size=30))
def test_ras_text_any_order_of_real_and_hostile_lines(lines):
    try:
        rep = ncclras.parse_ras("\n".join(lines))
    except ParseError:
        return
    _ras_ok(rep)
    for second in (rep, None):
        assert ncclras.verdict(rep, second, 3.0).text


def test_a_huge_report_is_one_error():
    try:
        ncclras.parse_ras("NCCL version 2.28\n" + "x\n" * (3 * 1024 * 1024))
        raise AssertionError("read")
    except ParseError as exc:
        assert "characters" in str(exc)


# ------------------------------------------------------------------ py-spy


PYSPY_LINES = st.sampled_from([
    "=== PID 2657: VLLM::Worker_TP0", "=== PID " + "9" * 500 + ": x", "Process 2657: VLLM::Worker_TP0",
    "Process " + "9" * 5000 + ": x", "Python v3.12.3 (/usr/bin/python3.12)", 'Thread 2657 (active): "MainThread"',
    'Thread 0x7F1E0B1FF740 (idle): "MainThread"', "    ncclAllReduce (libnccl.so.2)",
    "    all_reduce (vllm/distributed/device_communicators/pynccl.py:156)",
    "    f (x.py:" + "9" * 400 + ")", "    " + "a (" * 3000, "    " + "a (b:1" * 1000 + ")",
    "Error: Failed to find python version", "Permission Denied: Try running again", "", "\x1b[31m"])


@FAST
@given(st.lists(PYSPY_LINES, max_size=40))
def test_pyspy_any_order_of_real_and_hostile_lines(lines):
    try:
        dumps = pyspy.parse_pyspy("\n".join(lines))
    except ParseError:
        return
    for d in dumps:
        assert isinstance(d.pid, int) and 0 <= d.pid < 2**63
        for t in d.threads:
            assert len(t.frames) <= pyspy.MAX_FRAMES
            assert all(f.line is None or 0 <= f.line < 2**63 for f in t.frames)
        pyspy.wait_point(d).label()
    pyspy.summarise({"A": dumps})


def test_a_hostile_frame_line_is_linear():
    line = "    " + "a (" * 1300  # 3,900 characters: under the line cap
    t0 = time.process_time()
    for _ in range(200):
        pyspy.parse_pyspy("Process 1: x\nThread 1 (active): \"MainThread\"\n" + line + "\n")
    assert time.process_time() - t0 < 5  # a guard against the quadratic regex (it took ~40 s), not a figure


def test_frames_and_numbers_still_read():
    d = pyspy.parse_pyspy("Process 12: w\nThread 12 (active): \"MainThread\"\n"
                          "    all_reduce (vllm/distributed/device_communicators/pynccl.py:156)\n"
                          "    ncclAllReduce (libnccl.so.2)\n")[0]
    assert d.pid == 12 and str(d.main.frames[0]) == "all_reduce (vllm/distributed/device_communicators/pynccl.py:156)"
    assert d.main.frames[1].file == "libnccl.so.2" and d.main.frames[1].line is None
    assert not math.isnan(0.0)
