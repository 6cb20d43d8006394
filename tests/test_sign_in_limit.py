"""The wrong-credential limit per client address: a window of failures, then a lockout that ends with the
window; memory bounded however many addresses guess."""

from __future__ import annotations

from awb.clock import ManualClock
from awb.config import Config
from awb.sign_in_limit import SignInLimit, limit_for


def test_the_failure_past_the_limit_locks_the_address_until_the_window_passes() -> None:
    clock = ManualClock()
    limit = SignInLimit(3, 60, clock=clock)
    for _ in range(2):
        limit.failed("203.0.113.5")
    assert limit.retry_after("203.0.113.5") == 0
    clock.advance(seconds=10)
    limit.failed("203.0.113.5")
    assert limit.retry_after("203.0.113.5") == 60
    assert limit.retry_after("203.0.113.6") == 0
    clock.advance(seconds=59)
    assert limit.retry_after("203.0.113.5") == 1
    clock.advance(seconds=1)
    assert limit.retry_after("203.0.113.5") == 0


def test_failures_spread_over_more_than_a_window_never_lock() -> None:
    clock = ManualClock()
    limit = SignInLimit(3, 60, clock=clock)
    for _ in range(10):
        limit.failed("203.0.113.5")
        limit.failed("203.0.113.5")
        clock.advance(seconds=61)
    assert limit.retry_after("203.0.113.5") == 0


def test_the_tracker_keeps_at_most_its_cap_of_addresses_dropping_the_oldest() -> None:
    clock = ManualClock()
    limit = SignInLimit(1, 60, max_addresses=100, clock=clock)
    limit.failed("198.51.100.1")
    for n in range(1000):
        limit.failed(f"10.0.{n // 250}.{n % 250}")
    assert len(limit) == 100
    assert limit.retry_after("198.51.100.1") == 0
    assert limit.retry_after("10.0.3.249") == 60


def test_the_limit_comes_from_the_http_settings(tmp_path: object) -> None:
    config = Config(http={"max_auth_failures": 5, "auth_failure_window_seconds": 30, "auth_failure_addresses": 7})
    limit = limit_for(config)
    assert (limit.max_failures, limit.window, limit.max_addresses) == (5, 30, 7)
    defaults = limit_for(Config())
    assert (defaults.max_failures, defaults.window) == (20, 60)
