"""The Xid catalogue and an Xid line as an event of its GPU."""

from __future__ import annotations

from console.catalogue import xid
from console.probes.gpu_health import GpuHealth
from console.probes.kernel_log import parse_kernel_line
from console.station.health import xid_event
from console.station.messages import GpuHealthSample, KernelEvents
from console.station.state import StationState


def test_the_catalogue_says_meaning_severity_and_action():
    i79, i48 = xid.meaning(79), xid.meaning(48)
    assert i79.text == "GPU has fallen off the bus" and i79.severity == "fatal" and "reboot" in i79.action
    assert i48.text.startswith("Double-bit") and i48.severity == "fatal"
    assert xid.meaning(43).severity == "error" and xid.meaning(63).severity == "warning"
    assert xid.meaning(99999) is None and xid.describe(99999) == "Xid 99999 (see NVIDIA's Xid catalogue)"
    assert xid.severity(99999) == "error"  # unknown is never calm
    assert "docs.nvidia.com/deploy/xid-errors" in xid.CATALOGUE_URL


def test_an_xid_line_finds_its_gpu_by_bus_id():
    line = ("2026-12-02T03:01:02+0000 station-b kernel: NVRM: Xid (PCI:0001:01:00): 79, pid=2757, "
            "name=VLLM::Worker_TP0, GPU has fallen off the bus.")
    ev = parse_kernel_line(line)
    health = {0: GpuHealth(0, "00000000:01:00.0"), 1: GpuHealth(1, "00000001:01:00.0")}
    x = xid_event(ev, health, 5.0)
    assert (x.code, x.gpu, x.bus_id) == (79, 1, "0001:01:00")
    assert x.words().startswith("GPU1 Xid 79: GPU has fallen off the bus at ")


def test_state_keeps_each_xid_once_and_only_this_runs():
    s = StationState("B")
    s.apply(GpuHealthSample("B", [GpuHealth(0, "00000000:01:00.0")], 1.0))
    ev = parse_kernel_line("2026-12-02T03:01:02+0000 h kernel: NVRM: Xid (PCI:0000:01:00): 48, pid=1, DBE")
    assert s.apply(KernelEvents("B", [ev], 2.0))
    assert not s.apply(KernelEvents("B", [ev], 3.0))  # a restarted follower reads it again: kept once
    assert [x.code for x in s.run_xids()] == [48] and s.health_level() == "error"
