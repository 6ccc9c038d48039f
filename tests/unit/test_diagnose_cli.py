"""``dgx-console diagnose``: files, stdin, live station logs, JSON contract, exit codes."""

from __future__ import annotations

import io
import json
import os
import stat
import time
from pathlib import Path

import pytest

from console.cli import main
from tests.ports import refused_port

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def fake_docker(tmp_path: Path, body: str, exit_code: int = 0, kernel: str = "") -> Path:
    """A stand-in `docker` executable on PATH that prints a canned `docker logs --timestamps` output, and a
    stand-in `journalctl` that prints ``kernel`` (diagnose --station reads the kernel log too: never this
    machine's own)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "docker.out").write_text(body)
    script = bindir / "docker"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/docker.args\ncat {tmp_path}/docker.out\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "kernel.out").write_text(kernel)
    journal = bindir / "journalctl"
    journal.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/journalctl.args\ncat {tmp_path}/kernel.out\n")
    journal.chmod(journal.stat().st_mode | stat.S_IEXEC)
    return bindir


def write_config(tmp_path: Path, extra_station: str = "") -> Path:
    cfg = tmp_path / "dgx-console.toml"
    cfg.write_text(f"""
profile = "glm53-nvfp4-2x-gb300-vllm"
connect_timeout_s = 3
command_timeout_s = 10

[[stations]]
name = "station-b"
rank = 0
local = true
container = "glm53"
{extra_station}
""")
    return cfg


WORKER_LOG = "\n".join([
    "2026-11-30T14:05:20.000000001Z (Worker_TP1 pid=391) INFO 11-30 14:05:20 [parallel_state.py:1200] rank 1",
    "2026-11-30T14:05:21.123456789Z station-b:391:512 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.100.2<0>",
    "2026-11-30T14:05:21.223456789Z station-b:391:512 [0] NCCL INFO Using network Socket",
]) + "\n"


def test_file_with_fault_exits_1_and_names_cause(capsys):
    rc = main(["diagnose", str(LOGS / "shm-too-small__nccl-290.log")])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("ERROR   shm-too-small")
    assert "--shm-size" in out and "shm-too-small__nccl-290.log:5:" in out


def test_healthy_file_exits_0(capsys):
    assert main(["diagnose", str(LOGS / "healthy-sglang__pr-22331.log")]) == 0
    assert capsys.readouterr().out.startswith("no findings (5 lines read)")


def test_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO((LOGS / "port-in-use__vllm-7514.log").read_text()))
    assert main(["diagnose", "-", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["findings"][0]["id"] == "port-in-use"
    assert data["findings"][0]["evidence"][0]["source"] == "stdin"


def test_json_contract_and_ranking_across_two_files(capsys):
    rc = main(["diagnose", "--json", str(LOGS / "nccl-timeout__megatron-1207.log"),
               str(LOGS / "nccl-ib-missing__nccl-1410.log")])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [f["id"] for f in data["findings"]] == ["nccl-ib-missing", "nccl-socket-fallback", "nccl-timeout"]
    for f in data["findings"]:
        assert {"id", "severity", "station", "cause", "fix", "evidence", "count"} <= set(f)
        assert f["severity"] in ("error", "warning", "info")
        for e in f["evidence"]:
            assert set(e) >= {"source", "line", "text"} and isinstance(e["line"], int)
    assert data["findings"][2]["explained_by"].startswith("nccl-ib-missing@")


@pytest.mark.parametrize("argv,msg", [
    (["diagnose", "/no/such.log"], "/no/such.log: no such file"),
    (["diagnose"], "needs FILE"),
    (["diagnose", "x.log", "--tail", "0"], "--tail must be an integer 1..10,000,000"),
])
def test_usage_errors_one_line_exit_2(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_live_station_log_through_transport(tmp_path, monkeypatch, capsys):
    bindir = fake_docker(tmp_path, WORKER_LOG)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cfg = write_config(tmp_path)
    rc = main(["diagnose", "--json", "--config", str(cfg), "--station", "station-b", "--tail", "300"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    f = data["findings"][0]
    assert f["id"] == "nccl-socket-fallback" and f["station"] == "station-b" and f["count"] == 2
    assert f["evidence"][0]["line"] == 2 and f["first_seen_at"] == "2026-11-30T14:05:21.123456789Z"
    calls = (tmp_path / "docker.args").read_text().splitlines()
    assert calls[0].split() == ["logs", "--timestamps", "--tail", "300", "glm53"]
    assert calls[1].split()[0] == "inspect"  # its exit code: a stopped container is never silent


def test_unreachable_station_is_reported_not_fatal(tmp_path, monkeypatch, capsys):
    bindir = fake_docker(tmp_path, WORKER_LOG)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cfg = write_config(tmp_path, extra_station=f"""
[[stations]]
name = "station-a"
rank = 1
host = "127.0.0.1"
port = {refused_port()}
known_hosts = "{tmp_path}/known_hosts"
""")
    rc = main(["diagnose", "--json", "--config", str(cfg), "--station", "station-a", "--station", "station-b"])
    cap = capsys.readouterr()
    data = json.loads(cap.out)
    assert rc == 1
    assert "station-a: unreachable" in cap.err
    src = {s["source"]: s for s in data["sources"]}
    assert src["station-a"]["error"].startswith("unreachable") and src["station-b"]["error"] is None
    assert data["findings"][0]["id"] == "nccl-socket-fallback"


def test_unknown_station_is_usage_error(tmp_path, capsys):
    cfg = write_config(tmp_path)
    assert main(["diagnose", "--config", str(cfg), "--station", "nope"]) == 2
    assert "no such station" in capsys.readouterr().err


def test_a_stopped_container_with_an_exit_code_is_never_silent(tmp_path, monkeypatch, capsys):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "docker.out").write_text(WORKER_LOG.replace("Using network Socket", "Using network IB"))
    state = '{"Status":"exited","Running":false,"ExitCode":1,"OOMKilled":false,"StartedAt":"x","FinishedAt":"y"}'
    script = bindir / "docker"
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = inspect ]; then echo '{state}|img|sha256:1'; exit 0; fi\n"
                      f"cat {tmp_path}/docker.out\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cfg = write_config(tmp_path)
    rc = main(["diagnose", "--json", "--config", str(cfg), "--station", "station-b"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    f = data["findings"][0]
    assert f["id"] == "unrecognised-error" and f["severity"] == "warning"
    assert f["evidence"][0]["text"] == "container glm53 exited with code 1" and f["evidence"][0]["line"] is None


# The kernel log as a diagnosis source (journalctl -o short-iso, dated a minute ago: the read
# keeps what happened since the container started, the last hour when docker does not say)
_NOW = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(time.time() - 60))
KERNEL_LOG = "\n".join([
    f"{_NOW} station-b kernel: Linux version 6.11.0-1016-nvidia (buildd@lcy02)",
    "2020-11-30T14:05:29+0000 station-b kernel: Out of memory: Killed process 7 (old) total-vm:1kB",  # before: dropped
    f"{_NOW} station-b kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
    "mems_allowed=0,global_oom,task=VLLM::Worker_TP,pid=391,uid=0",
    f"{_NOW} station-b kernel: Out of memory: Killed process 391 (VLLM::Worker_TP) "
    "total-vm:131402388kB, anon-rss:118214712kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:236112kB",
    f"{_NOW} station-b kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=391, name=VLLM::Worker_TP, "
    "GPU has fallen off the bus.",
]) + "\n"
DIED_LOG = "\n".join([
    "2026-11-30T14:05:20.000000001Z (Worker_TP1 pid=391) INFO 11-30 14:05:20 [parallel_state.py:1200] rank 1",
    "2026-11-30T14:05:32.000000001Z (APIServer pid=1) ERROR 11-30 14:05:32 [multiproc_executor.py:229] Worker proc "
    "VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
]) + "\n"


def test_station_diagnosis_reads_the_kernel_log(tmp_path, monkeypatch, capsys):
    """Fails without the kernel-log read: the OOM killer and the Xid are findings of the station, with
    the kernel log named as their source, and worker-died's "often the OOM killer" becomes the evidence."""
    bindir = fake_docker(tmp_path, DIED_LOG, kernel=KERNEL_LOG)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cfg = write_config(tmp_path)
    rc = main(["diagnose", "--json", "--config", str(cfg), "--station", "station-b"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    by_id = {f["id"]: f for f in data["findings"]}
    assert {"gpu-xid", "host-oom-kill", "worker-died"} <= set(by_id), list(by_id)
    xid = by_id["gpu-xid"]
    assert xid["station"] == "station-b" and "Xid 79" in xid["cause"]
    assert xid["evidence"][0]["source"] == "station-b kernel log" and xid["evidence"][0]["line"] is None
    assert "): 79," in xid["evidence"][0]["text"]  # the raw code, as the driver printed it
    assert "OOM killer killed it" in by_id["worker-died"]["cause"]
    ids = [f["id"] for f in data["findings"]]
    assert ids.index("host-oom-kill") < ids.index("worker-died")
    src = data["sources"][0]
    assert src["kernel"] == {"lines": 3, "error": None}
    assert "--since @" in (tmp_path / "journalctl.args").read_text()
