"""Host names: whether one is this machine (the server's bind check, a recipe's writer endpoint)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for localhost and 127.0.0.0/8 / ::1 addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
