"""Link checks against real sshd, real ip/ping/ssh in network namespaces, with real faults."""

from __future__ import annotations

import os
import subprocess
import threading

from lab import REAL_TOOLS

from console.station.checks import SPECS, run_checks

# How each check is answered in the lab (printed by test_healthy_lab_passes_every_check):
REAL_IN_LAB = {"station-reachable", "mtu-value", "mtu-mismatch", "jumbo-ping", "rail-route", "clock-skew", "ssh-a-to-b", "user-mismatch",
               "disk-space"}  # real tools on real kernel state
REAL_OVER_LAB_FILES = {"checkpoint-mismatch", "model-config", "env-mismatch", "rdma-errors"}  # real cat/grep/sha256sum
SHIM_OVER_REAL_CARRIER = {"link-down"}  # simulated ethtool reading the veth's real carrier


def by(results, id_, station):
    hit = [r for r in results if r.id == id_ and r.station == station]
    assert hit, f"no {id_} result for {station}: {[(r.id, r.station) for r in results]}"
    return hit[0]


async def test_healthy_lab_passes_every_check(lab, capsys):
    results = await run_checks(lab.config())
    bad = [(r.id, r.station, r.status, r.summary) for r in results if r.status not in ("pass",)
           and r.id != "api-exposed"]
    assert not bad, bad
    assert {r.id for r in results} == {s.id for s in SPECS}
    with capsys.disabled():
        sim = sorted({s.id for s in SPECS} - REAL_IN_LAB - REAL_OVER_LAB_FILES - SHIM_OVER_REAL_CARRIER)
        print(f"\n[lab] real tools: {', '.join(REAL_TOOLS)}, sshd, cat/grep/sha256sum/find"
              f"\n[lab] real: {', '.join(sorted(REAL_IN_LAB))}"
              f"\n[lab] real commands over files the lab wrote: {', '.join(sorted(REAL_OVER_LAB_FILES))}"
              f"\n[lab] shim reading the real carrier: {', '.join(sorted(SHIM_OVER_REAL_CARRIER))}"
              f"\n[lab] simulated (GPU/Docker/RDMA/NTP shims behind real sshd, or config only): {', '.join(sim)}")


async def test_mtu_1500_on_b_is_a_mismatch_and_the_jumbo_ping_fails(lab):
    lab.set_mtu("B", 1500)
    results = await run_checks(lab.config(), only=["mtu-value", "mtu-mismatch", "jumbo-ping"])
    mm = by(results, "mtu-mismatch", "A<->B")
    assert mm.status == "fail" and "A 9000, B 1500" in mm.summary
    assert "mtu 1500" in mm.evidence  # the real `ip -o link` line of B
    assert by(results, "mtu-value", "B").status == "fail"
    assert by(results, "mtu-value", "A").status == "pass"
    a_to_b = by(results, "jumbo-ping", "A->B")
    assert a_to_b.status == "fail"
    assert "100% packet loss" in a_to_b.evidence and "ping -M do -s 8972" in a_to_b.evidence
    b_to_a = by(results, "jumbo-ping", "B->A")
    assert b_to_a.status == "fail"
    assert "local error: message too long, mtu=1500" in b_to_a.evidence  # real iputils output
    assert "mtu 9000" in b_to_a.fix


async def test_rail_link_down(lab):
    lab.rail_down("B")
    results = await run_checks(lab.config(), only=["link-down", "jumbo-ping"])
    a = by(results, "link-down", "A")
    assert a.status == "fail" and "Link detected: no" in a.evidence and a.fix
    assert by(results, "link-down", "B").status == "fail"
    assert by(results, "jumbo-ping", "A->B").status == "fail"


async def test_sshd_killed_on_b_fails_reachable_skips_b_and_runs_a(lab):
    from console.station.checks import overall

    lab.kill_sshd("B")
    results = await run_checks(lab.config())
    gate = by(results, "station-reachable", "B")
    assert gate.status == "fail" and "Connect call failed" in gate.summary and gate.fix
    assert overall(results) == 1
    b_only = [r for r in results if r.station == "B" and r.id != "station-reachable"]
    assert b_only and all(r.status == "skip" and "unreachable" in r.summary for r in b_only)
    assert by(results, "link-speed", "A").status == "pass"
    assert by(results, "jumbo-ping", "A->B").status == "pass"  # the rail itself is fine
    ssh = by(results, "ssh-a-to-b", "A->B")
    assert ssh.status == "fail" and "Connection refused" in ssh.summary


async def test_passwordless_ssh_really_tested(lab):
    ok = await run_checks(lab.config(), only=["ssh-a-to-b"])
    assert by(ok, "ssh-a-to-b", "A->B").status == "pass"
    lab.remove_a_to_b_key()
    results = await run_checks(lab.config(), only=["ssh-a-to-b"])
    r = by(results, "ssh-a-to-b", "A->B")
    assert r.status == "fail"
    assert "Permission denied" in r.summary
    assert "ssh-copy-id" in r.fix and "BatchMode=yes" in r.evidence


async def test_port_counters_growing_between_reads_fail(lab):
    # The counter is a FIFO for the first read (it gets 5); as soon as that read has its value the
    # FIFO is replaced by a file holding 50, which the second read (an interval later) finds.
    path = lab.counter_path("A", "symbol_error")
    later = path.with_name("symbol_error.next")
    later.write_text("50\n")
    path.unlink()
    os.mkfifo(path)

    def serve():
        with open(path, "w") as fh:  # blocks until the first read opens it
            fh.write("5\n")
        os.replace(later, path)

    writer = threading.Thread(target=serve, daemon=True)
    writer.start()
    results = await run_checks(lab.config(), only=["rdma-errors"])
    writer.join(5)
    r = by(results, "rdma-errors", "A")
    assert r.status == "fail" and "symbol_error +45" in r.summary
    assert "symbol_error:5" in r.evidence and "symbol_error:50" in r.evidence
    assert by(results, "rdma-errors", "B").status == "pass"


async def test_past_port_errors_warn(lab):
    lab.bump_counter("B", "link_downed", 2)
    results = await run_checks(lab.config(), only=["rdma-errors"])
    r = by(results, "rdma-errors", "B")
    assert r.status == "warn" and "link_downed=2" in r.summary


def test_lab_leaves_nothing_behind(lab_prerequisites):
    from lab import Lab

    lab = Lab().setup()
    names = list(lab.ns.values())
    lab.kill_sshd("B")
    lab.teardown()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in listed for n in names)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert lab.host_if["A"] not in links and not lab.dir.exists()


async def test_unknown_host_key_of_b_fails_without_prompting(lab):
    (lab.dir / "A" / "known_hosts").write_text("")  # A never accepted B's key
    results = await run_checks(lab.config(), only=["ssh-a-to-b"])
    r = by(results, "ssh-a-to-b", "A->B")
    assert r.status == "fail" and "Host key verification failed" in r.evidence
    assert "fingerprint" in r.fix
