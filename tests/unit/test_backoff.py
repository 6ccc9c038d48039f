"""The one back-off table of the long-lived loops (console/supervisor.py): it grows and stops at its
cap, a long run starts it over, a refused login waits longer, and each loop waits by it."""

from __future__ import annotations

import pytest

from console.supervisor import AUTH_SLOWER, HEALTHY_AFTER_S, RESTART_DELAYS_S, Backoff, restart_delay


def test_the_table_grows_then_stays_at_its_cap():
    waits = [restart_delay(n) for n in range(1, 10)]
    assert waits[:6] == [1.0, 2.0, 5.0, 10.0, 20.0, 30.0]
    assert waits == sorted(waits) and set(waits[5:]) == {RESTART_DELAYS_S[-1]}
    assert restart_delay(0) == restart_delay(-3) == 1.0  # no failure yet counts as the first


def test_scale_and_a_lower_cap():
    assert [restart_delay(n, 0.01) for n in (1, 2, 3)] == pytest.approx([0.01, 0.02, 0.05])
    assert [restart_delay(n, cap_s=10) for n in (3, 4, 5, 9)] == [5.0, 10.0, 10.0, 10.0]
    assert restart_delay(9, 2.0, cap_s=10) == 20.0  # the cap is the table's, before the scale


def test_a_refused_login_waits_longer():
    assert AUTH_SLOWER == 2.0
    for n in range(1, 8):
        assert restart_delay(n, auth=True) == AUTH_SLOWER * restart_delay(n) > restart_delay(n)
    auth, plain = Backoff(auth=True), Backoff()
    assert [auth.failed(0) for _ in range(3)] == [2.0, 4.0, 10.0]
    assert [plain.failed(0) for _ in range(3)] == [1.0, 2.0, 5.0]


def test_backoff_counts_failures_in_a_row_and_a_long_run_starts_it_over():
    b = Backoff()
    assert [b.failed(1.0) for _ in range(7)] == [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 30.0]
    assert b.failed(HEALTHY_AFTER_S) == 1.0  # that run was a healthy one: its failure is a first
    assert b.failed(HEALTHY_AFTER_S - 1) == 2.0
    b.reset()
    assert b.failures == 0 and b.failed(0) == 1.0


def test_backoff_with_its_own_healthy_run_and_cap():
    b = Backoff(healthy_after_s=5, cap_s=10)
    assert [b.failed(0.1) for _ in range(5)] == [1.0, 2.0, 5.0, 10.0, 10.0]
    assert b.failed(5.0) == 1.0
