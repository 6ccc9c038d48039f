"""The rails loop's rounds and the rail tracker: sysfs variants (a down link's speed ``-1``
or unreadable, a counter the NIC lacks), rates over the last minute, flaps from ``carrier_changes``
(a blip shorter than the loop's interval still counts) or from seen transitions, the strip's words."""

from __future__ import annotations

from console.probes.rails import parse_round
from console.station.rails_live import RailTracker

N = "enp1s0f1np1"


def _round(up=True, changes=0, oos=0, speed=None, extra=()):
    lines = [f"R {N}.operstate {'up' if up else 'down'}", f"R {N}.carrier {1 if up else 0}",
             f"R {N}.speed {speed if speed is not None else (400000 if up else -1)}", f"R {N}.mtu 9000",
             f"R {N}.carrier_changes {changes}", f"R {N}.rx_errors 0\r", f"  R {N}.ib.state 4: ACTIVE  ",
             f"R {N}.ib.out_of_sequence {oos}", f"R {N}.ib.rp_cnp_handled -", *extra]
    return parse_round(lines, [N])


def test_a_round_read_with_its_variants():
    r = _round()[N]
    assert (r.up, r.speed_mbps, r.mtu, r.port_state, r.carrier_changes) == (True, 400000, 9000, "ACTIVE", 0)
    assert r.counters == {"rx_errors": 0, "out_of_sequence": 0}  # "-": not read, never zero
    d = _round(up=False)[N]
    assert d.up is False and d.speed_mbps is None
    unreadable = parse_round([f"R {N}.carrier -", f"R {N}.operstate -", f"R {N}.speed -"], [N])[N]
    assert unreadable.up is None and unreadable.speed_mbps is None
    assert parse_round([], ["other"])["other"].up is None  # asked for, nothing read


def test_rates_over_the_last_minute_and_the_strip():
    t = RailTracker(400000, 9000)
    t.feed(_round(oos=0), 100.0)
    v = t.feed(_round(oos=3000), 102.0)[N]
    assert v.rates["out_of_sequence"] == 1500.0 and v.err_rate == 1500.0 and v.level == "warn"
    assert v.words(102.0) == "1,500 err/s · ▲ 400G 9000"  # trouble first
    v = t.feed(_round(oos=3000), 200.0)[N]  # the window moved on: no growth in it
    assert v.err_rate == 0 and v.level is None and v.words(200.0) == "▲ 400G 9000 · 0 err/s" and v.short() == "▲ 400G"


def test_down_counts_up_and_a_down_up_is_a_flap():
    t = RailTracker(400000, 9000)
    t.feed(_round(changes=4), 100.0)
    v = t.feed(_round(up=False, changes=5), 102.0)[N]
    assert v.up is False and v.words(114.0) == "✖ down 12 s" and v.level == "error" and v.short() == "✖ down"
    v = t.feed(_round(changes=6), 104.0)[N]
    assert v.flaps == 1 and "⚠ flapped 1× since " in v.words(104.0) and v.level == "warn"
    v = t.feed(_round(changes=10), 106.0)[N]  # two blips between two reads: carrier_changes saw them
    assert v.flaps == 3
    assert t.feed(_round(changes=10), 106.0 + 601)[N].flaps == 0  # ten minutes on: forgotten


def test_without_carrier_changes_the_seen_transitions_count():
    t = RailTracker()
    lines = lambda up: [f"R {N}.carrier {1 if up else 0}"]  # noqa: E731
    t.feed(parse_round(lines(True), [N]), 1.0)
    t.feed(parse_round(lines(False), [N]), 2.0)
    assert t.feed(parse_round(lines(True), [N]), 3.0)[N].flaps == 1


def test_slow_and_wrong_mtu_say_so():
    t = RailTracker(400000, 9000)
    v = t.feed(parse_round([f"R {N}.carrier 1", f"R {N}.speed 200000", f"R {N}.mtu 1500"], [N]), 1.0)[N]
    assert v.slow and v.level == "warn"
    assert v.words(1.0) == "⚠ 200G (expected 400G) 1500 (expected 9000) · ? err/s"
