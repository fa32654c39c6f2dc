"""Which hosts are this machine."""

from trainer_core.hosts import is_loopback


def test_loopback_names_and_addresses():
    assert all(is_loopback(h) for h in ("localhost", "127.0.0.1", "127.8.9.10", "::1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com", "", "localhost.example.com"))
