"""The words of the hang evidence's threads, stragglers and requests (``evidence_words``): what was
not read says "not read" and why, never blank or "clean"; a stale read says its age; station text
passes the sanitizer."""

from __future__ import annotations

from console.doctor.evidence_words import requests_words, straggler_words, stragglers_line, threads_words
from console.probes import proc_tasks

STRAGGLERS = {"status": "ok", "kind": "out-of-step", "text": "ranks out of step", "read_on": "A",
              "reads": "one-read", "age_s": 1.0, "ranks": [{"rank": 1, "station": "B", "behind": 3}],
              "missing": [{"rank": 2, "station": None, "dead": True}]}


def test_threads_not_read_in_every_way_says_not_read():
    assert threads_words({"status": "not-read"}) == "not read: no thread read"
    assert threads_words({"status": "not-running", "note": "the container glm53 is exited", "processes": []}) == (
        "not read: the container glm53 is exited")
    assert threads_words({"status": "no-process", "note": "no engine process in the container"}) == (
        "not read: no engine process in the container")
    assert threads_words({"status": "ok", "processes": [{"threads": []}], "note": ""}) == "not read: no thread listed"


def test_threads_count_d_by_wait_channel_and_say_a_stale_read():
    text = "=== PID 9: x\n" + "".join(
        f"--- TID {i}\nstat {i} (t) {st} 1\nwchan {w}\n" for i, (st, w) in
        enumerate([("D", "nv_wait_for_event"), ("D", "nv_wait_for_event"), ("S", "futex_wait_queue"),
                    ("R", "0"), ("D", "\x1b[31mevil")], start=10))
    t = proc_tasks.tasks_json(text)
    words = threads_words(t)
    assert words.startswith("5 threads, 3 in D (2 nv_wait_for_event, 1 evil")
    assert "\x1b" not in words and "1 S futex_wait_queue" in words
    assert threads_words(t, age_s=2.0, stale_after_s=5.0) == words  # fresh: no age
    assert threads_words(t, age_s=31.0, stale_after_s=5.0) == f"stale: 31 s old: {words}"


def test_stragglers_per_station_and_in_one_line():
    assert straggler_words(STRAGGLERS, "B") == "behind by 3 ops (RAS on A, one read, 1 s old)"
    assert straggler_words(STRAGGLERS, "A", age_s=9.0, stale_after_s=5.0) == (
        "not behind (RAS on A, one read, stale: 9 s old)")
    assert stragglers_line(STRAGGLERS) == "B behind by 3 ops, rank 2 missing (dead) (RAS on A, one read, 1 s old)"
    unjudged = STRAGGLERS | {"kind": "unavailable", "text": "RAS gave no counts", "ranks": [], "missing": []}
    assert straggler_words(unjudged, "A").startswith("not judged: RAS gave no counts")
    assert straggler_words({"status": "not-read", "ranks": []}, "A") == "not read: no RAS report"


def test_requests_ok_stale_and_not_read():
    assert requests_words({"status": "ok", "running": 2, "waiting": None, "age_s": 0.4}) == (
        "2 running, ? waiting (0 s old)")
    assert requests_words({"status": "stale", "running": 2, "waiting": 0, "age_s": 14.2,
                           "note": "ConnectError\nx"}) == "stale: 14 s old: 2 running, 0 waiting (last poll: ConnectError x)"
    assert requests_words({"status": "not-read", "note": "not read: no good read"}) == "not read: no good read"
    assert requests_words(None).startswith("not read: ")
