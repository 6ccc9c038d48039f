"""The recovery's rules, pure: the hour's limit (and when it lifts), the back-off doubling per restart
made that hour, and the [recover] table's checks (kinds, range, the capture it needs)."""

from __future__ import annotations

import pytest

from console.config import ConfigError
from console.incidents.recover import HOUR_S, backoff_wait, limit_reached
from tests.two_stations import two_station_config


def test_the_limit_counts_the_last_hour_and_says_when_it_lifts():
    now = 10_000.0
    assert limit_reached([], 1, now) is None
    assert limit_reached([now - 100], 1, now) == now - 100 + HOUR_S
    assert limit_reached([now - HOUR_S - 1], 1, now) is None  # an hour ago no longer counts
    assert limit_reached([now - 50, now - 10], 3, now) is None


def test_the_back_off_doubles_per_restart_of_the_hour():
    now = 10_000.0
    assert backoff_wait([], None, 120, now) == 0.0
    assert backoff_wait([now - 30], now - 20, 120, now) == pytest.approx(100.0)  # 120 after the first
    assert backoff_wait([now - 300, now - 30], now - 20, 120, now) == pytest.approx(220.0)  # 240 after the second
    assert backoff_wait([now - 300], now - 200, 120, now) == 0.0
    assert backoff_wait([now - 30], now - 20, 0, now) == 0.0


@pytest.mark.parametrize(("above", "words"), [
    ('[recover]\non = ["wedgy"]\n', "unknown incident kind 'wedgy'"),
    ('[recover]\non = ["wedge", "wedge"]\n', "names a kind twice"),
    ('[recover]\non = ["wedge"]\nmax_per_hour = 0\n', "recover.max_per_hour: must be >= 1"),
    ('[recover]\non = ["wedge"]\n[incidents]\ncapture = false\n', "needs [incidents] capture = true"),
])
def test_bad_recover_tables_are_one_line(above, words):
    with pytest.raises(ConfigError) as err:
        two_station_config(above=above)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_recover_is_off_by_default_and_read_when_set():
    assert two_station_config().recover.on == ()
    cfg = two_station_config(above='[recover]\non = ["wedge", "rank-death"]\nmax_per_hour = 3\nbackoff_s = 60\n')
    assert cfg.recover.on == ("wedge", "rank-death") and cfg.recover.max_per_hour == 3 and cfg.recover.backoff_s == 60


def test_the_config_knows_every_incident_kind():
    from console.config.schema import RECOVER_KINDS
    from console.incidents.detector import INCIDENT_KINDS

    assert set(RECOVER_KINDS) == set(INCIDENT_KINDS.values())  # a new alarm kind is one line in each
