"""Failed-login throttling: 5 failures a minute per address, then waits that end."""

from api.throttle import FailureThrottle


def test_five_failures_then_a_wait_that_ends():
    now = [1000.0]
    throttle = FailureThrottle(limit=5, window_s=60, clock=lambda: now[0])
    for _ in range(5):
        assert throttle.retry_after("1.2.3.4") is None
        throttle.fail("1.2.3.4")
        now[0] += 1
    assert 55 <= throttle.retry_after("1.2.3.4") <= 56
    assert throttle.retry_after("5.6.7.8") is None  # other addresses are not affected
    now[0] += 56
    assert throttle.retry_after("1.2.3.4") is None  # the oldest failure left the window
    throttle.succeed("1.2.3.4")
    assert throttle.retry_after("1.2.3.4") is None
