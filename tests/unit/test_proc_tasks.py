"""The engine threads' kernel-side state: the real command line run by a real shell against a real
process's /proc (``docker top`` answered by a stand-in that names that process), and the parser on
hostile text (forged markers, clipped and junk lines, names with parentheses, unreadable stacks)."""

from __future__ import annotations

import os
import subprocess
import sys

from console.probes.proc_tasks import MAX_STACK_LINES, parse_stat, parse_tasks, tasks_json, wait_kind
from console.remote import cmdlines


def _run_real(tmp_path, pid: int) -> str:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text(f"#!/bin/sh\necho 'PID                 COMMAND'\necho '{pid}                python3 -m vllm serve'\n"
                      "echo '1                   /sbin/tini -- bash'\n")
    docker.chmod(0o755)
    env = os.environ | {"PATH": f"{bindir}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", cmdlines.engine_tasks("glm53")], env=env, capture_output=True, text=True,
                          timeout=60).stdout


def test_the_real_command_reads_every_thread_of_a_real_process(tmp_path):
    code = "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n" \
           "print('up', flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "up"
        text = _run_real(tmp_path, p.pid)
    finally:
        p.kill()
        p.wait()
    (proc,) = parse_tasks(text)  # tini is not an engine process: not read
    assert proc.pid == p.pid and "vllm" in proc.cmdline
    assert len(proc.threads) == 4 and {t.tid for t in proc.threads} >= {p.pid}, text[:2000]
    for t in proc.threads:
        assert t.state in ("S", "R", "D") and t.comm and t.wchan is not None, t
        if t.stack is None:  # readable for root with CAP_SYS_ADMIN only: said, never blank
            assert t.stack_note.startswith("not read: "), t
    sleepers = [t for t in proc.threads if t.state == "S"]
    assert sleepers and all(t.wait in ("sleep", "host-lock", "network", "unknown") for t in sleepers)
    data = tasks_json(text)
    assert data["status"] == "ok" and f"pid {p.pid}:" in data["note"]


def test_a_gone_process_and_no_engine_are_said(tmp_path):
    text = _run_real(tmp_path, 4_000_000)  # above pid_max: no such process
    (proc,) = parse_tasks(text)
    assert proc.threads == [] and proc.note.startswith("not read: no task directory")
    assert tasks_json(text)["status"] == "not-read"
    assert tasks_json("NO-ENGINE-PROCESS\n")["status"] == "no-process"
    assert tasks_json("Error response from daemon: No such container: glm53\n") == {
        "status": "not-read", "note": "Error response from daemon: No such container: glm53", "processes": []}


def test_hostile_text_is_bounded_and_never_raises():
    stack = "\n".join(f"[<0>] frame_{i}+0x1/0x2" for i in range(100))
    text = "\n".join([
        "junk before any process", "--- TID 5", "stat 5 (x) R",  # outside a process: ignored
        "=== PID 100: python3 \x1b[31m[bold]vllm[/bold]",
        "--- TID 100", "stat 100 (py) thon) (x) D 1 2 3", "wchan nv_wait_for_event", "stack", stack,
        "--- TID 101", "stat garbage", "wchan ?", "stack-error head: error reading '/proc/100/task/101/stack': "
        "Permission denied",
        "--- TID 102", "stat 102 (w) S 1", "wchan futex_wait_queue", "stack-error head: cannot open: No such file",
        "--- TID 103",  # nothing after it
        "MORE-TASKS",
        "=== PID 200: x", "NO-TASKS gone",
        "=== PID abc: not a pid",
        "=== PID 300: " + "y" * 100_000,
    ])
    procs = parse_tasks(text)
    assert [p.pid for p in procs] == [100, 200, 300]
    p = procs[0]
    assert "\x1b" not in p.cmdline and p.clipped
    a, b, c, d = p.threads
    assert (a.comm, a.state, a.wait) == ("py) thon) (x", "D", "gpu-driver") and len(a.stack) == MAX_STACK_LINES
    assert (b.comm, b.state, b.wchan, b.stack, b.stack_note) == (None, None, None, None, "not read: permission")
    assert b.to_json()["state_words"] == "not read" and b.to_json()["wchan"] == "not read"
    assert c.wait == "host-lock" and c.stack_note == "not read: the thread ended"
    assert d.stack is None and d.stack_note == "not read: no answer"
    assert procs[1].note == "not read: gone" and len(procs[2].cmdline) < 300
    assert "1 D nv_wait_for_event" in p.summary() and "more threads not read" in p.summary()
    assert "kernel stacks not read: permission, 1 threads" in tasks_json(text)["note"]
    for junk in ("", "\x00" * 50, "=== PID 1:", "=== PID 1: a\n--- TID 2\nstack\n" + "x" * 10, "--- TID\nstat (\n"):
        tasks_json(junk)  # never raises


def test_the_wait_words():
    assert parse_stat("42 (python3) S 1 42") == ("python3", "S")
    assert parse_stat("(no pid) S") == (None, None) and parse_stat("42 (x) 7") == (None, None)
    assert wait_kind("R", "0") == "running" and wait_kind("S", "futex_wait_queue") == "host-lock"
    assert wait_kind("D", "uvm_spin_loop") == "gpu-driver" and wait_kind("S", "do_epoll_wait") == "network"
    assert wait_kind("D", "0", ("[<0>] io_schedule+0x12/0x40",)) == "io" and wait_kind(None, "x") == "unknown"
