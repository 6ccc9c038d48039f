"""A container that never started has no start time: ``status --json`` and
``watch --json`` say null, not docker's zero time "0001-01-01T00:00:00Z"."""

from __future__ import annotations

from console.probes.docker import ContainerInfo
from console.station.messages import ConnectionState, ContainerUpdate
from console.station.snapshot import status_dict, watch_json
from console.station.state import StationState


def test_a_never_started_container_has_a_null_started_at():
    s = StationState("A", rank=0, head=True, container="glm53")
    s.apply(ConnectionState("A", "live", last_sample_at=99.0))
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "created", started_at="0001-01-01T00:00:00Z"), at=90.0))
    assert status_dict(s)["container"]["started_at"] is None
    assert watch_json(s, 100.0)["container"]["started_at"] is None
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at="2026-12-01T11:55:00Z"), at=95.0))
    assert status_dict(s)["container"]["started_at"] == "2026-12-01T11:55:00Z"
