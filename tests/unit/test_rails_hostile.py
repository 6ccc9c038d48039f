"""sysfs rail reads a broken driver or a hostile station gives: a carrier_changes jump of 1e8 is
clamped to what a link can do (no 50-million-entry flap list), a 2^64 or negative speed, a huge MTU
and negative counters are unknown."""

from __future__ import annotations

from console.probes.rails import RailReading, parse_round
from console.station.rails_live import MAX_FLAPS, MAX_FLAPS_PER_S, RailTracker


def test_a_huge_carrier_changes_jump_is_clamped():
    tr = RailTracker()
    tr.feed({"r0": RailReading("r0", carrier=True, carrier_changes=2)}, at=100.0)
    views = tr.feed({"r0": RailReading("r0", carrier=True, carrier_changes=100_000_002)}, at=102.0)
    assert views["r0"].flaps == 1 + 2 * MAX_FLAPS_PER_S
    for i in range(1, 400):  # a station that keeps saying so: the list stays bounded
        views = tr.feed({"r0": RailReading("r0", carrier=True, carrier_changes=100_000_002 + i * 10**8)},
                        at=102.0 + i * 2)
    assert views["r0"].flaps <= MAX_FLAPS


def test_a_real_flap_still_counts():
    tr = RailTracker()
    tr.feed({"r0": RailReading("r0", carrier=True, carrier_changes=4)}, at=10.0)
    views = tr.feed({"r0": RailReading("r0", carrier=True, carrier_changes=8)}, at=12.0)
    assert views["r0"].flaps == 2


def test_hostile_sysfs_values_are_unknown():
    lines = ["r0.carrier 1", f"r0.speed {2**64}", "r0.mtu 99999999999", "r0.carrier_changes -5",
             "r0.rx_errors -1", "r0.tx_errors " + "9" * 400]
    r = parse_round(lines, ["r0"])["r0"]
    assert (r.speed_mbps, r.mtu, r.carrier_changes) == (None, None, None) and r.counters == {}
    r = parse_round(["r0.speed -1", "r0.mtu 9000", "r0.carrier_changes 7"], ["r0"])["r0"]
    assert (r.speed_mbps, r.mtu, r.carrier_changes) == (None, 9000, 7)
