"""One home for durations (console/durations.py): each style keeps the exact text its screens showed."""

from __future__ import annotations

import pytest

from console import durations as d


@pytest.mark.parametrize("seconds, text", [
    (None, "—"), (-3, "0 s"), (0.9, "0 s"), (12.7, "12 s"), (119.9, "119 s"), (120, "2 min"), (7199, "119 min"),
    (7200, "2 h"), (90000, "25 h"),
])
def test_age_truncates_to_whole_units(seconds, text):
    assert d.age(seconds) == text


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (44.6, "45 s"), (89.4, "89 s"), (90, "2 min"), (150, "2 min"), (5399, "90 min"), (5400, "1.5 h"),
    (36000, "10.0 h"),
])
def test_span_rounds(seconds, text):
    assert d.span(seconds) == text


@pytest.mark.parametrize("seconds, text", [
    (0, "now"), (0.4, "now"), (30, "-30 s"), (60, "-60 s"), (90, "-90 s"), (120, "-2 min"), (150, "-150 s"),
    (1800, "-30 min"), (3600, "-1 h"), (5400, "-90 min"), (7200, "-2 h"),
])
def test_tick_uses_the_largest_unit_that_divides(seconds, text):
    assert d.tick(seconds) == text


@pytest.mark.parametrize("seconds, text", [(0, "0:00"), (5.9, "0:05"), (247, "4:07"), (4320, "72:00")])
def test_clock(seconds, text):
    assert d.clock(seconds) == text


@pytest.mark.parametrize("seconds, text", [(0.12, "120ms"), (2.34, "2.3s"), (59.9, "59.9s"), (60, "1m00s"),
                                           (247.4, "4m07s")])
def test_compact(seconds, text):
    assert d.compact(seconds) == text


def test_elapsed():
    assert d.elapsed(12.345) == "12.3 s"
    assert d.elapsed(239.6, 0) == "240 s"


def test_time_ticks_labels_come_from_tick():
    from console.ui.widgets.gpu_history import time_ticks

    assert time_ticks(300, most=5) == ([-240.0, -120.0, 0.0], ["-4 min", "-2 min", "now"])
    assert time_ticks(3600, most=5) == ([-3600.0, -2700.0, -1800.0, -900.0, 0.0],
                                        ["-1 h", "-45 min", "-30 min", "-15 min", "now"])
