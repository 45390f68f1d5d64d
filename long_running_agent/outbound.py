"""Where this server POSTs at a URL someone else gave it (a Slack response_url, an A2A client's push URL): only to
the hosts a setting lists, so a request cannot make the server post anywhere.
"""

from __future__ import annotations

import ipaddress

import httpx

# Where a receiver on this machine listens: always allowed.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def refused_url(url: str, hosts: tuple[str, ...], setting: str) -> str | None:
    """Why this server will not POST to `url`, or None: https to one of `hosts` (the `setting` naming them), or plain
    http to a loopback host listed there (a fake receiver, a local proxy)."""
    try:
        # httpx's own parser, so the host checked is the host the POST goes to.
        parsed = httpx.URL(url)
        port_ok = parsed.port is None or 0 < parsed.port < 65536
    except httpx.InvalidURL:
        port_ok = False
    if not port_ok or not parsed.host:
        return f"{url[:100]!r} is not a URL"
    if parsed.host not in hosts:
        return f"its host, {parsed.host[:100]}, is not one of {setting} ({', '.join(hosts)})"
    if parsed.scheme == "https" or (parsed.scheme == "http" and _loopback(parsed.host)):
        return None
    return f"it is {parsed.scheme or 'not'} https (plain http only to a loopback host)"


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
