"""Evalsite's own address: nothing the engine sends may reach the app itself.

A blueprint chooses where its custom models, judges on custom models, embeddings and `$call` services
send requests, and fills their bodies (``parameters``). Pointed at evalsite's own API, such a request
would cancel runs, rename blueprints or start runs with no confirmation or budget. Two guards:

* at send time, a URL on a port evalsite serves (``PORT``) whose host is this machine (a loopback or
  unspecified address, an address this machine holds, or the address evalsite is bound to) is refused
  with the reason: the call fails with it, never a pass or a fail, and no request leaves;
* every request the engine sends carries :data:`ENGINE_HEADER` (a blueprint's headers cannot remove
  it), and evalsite refuses any request that carries it (``evalsite.security.EngineRequestMiddleware``),
  should one arrive anyway: through a proxy on another port, or a name that resolved elsewhere when
  it was checked.

Only a URL on one of our ports is looked up (a name resolution, on a thread), so every other call
costs one comparison.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from functools import lru_cache

import httpx

ENGINE_HEADER = "X-Evalsite-Engine"
ENGINE_HEADER_VALUE = "1"


def with_engine_header(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the engine's mark last, and any header of the same name (in any case) dropped."""
    marked = {name: value for name, value in headers.items() if name.lower() != ENGINE_HEADER.lower()}
    marked[ENGINE_HEADER] = ENGINE_HEADER_VALUE
    return marked


@lru_cache(maxsize=256)
def _held_here(address: str) -> bool:
    """Whether this machine holds ``address`` (it can bind a socket to it)."""
    ip = ipaddress.ip_address(address)
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def is_this_machine(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    return ip.is_loopback or ip.is_unspecified or _held_here(str(ip))


@lru_cache(maxsize=1024)
def _host_and_port(url: str) -> tuple[str, int] | None:
    """A URL's host (lower case, no brackets) and port (the scheme's when none is written); parsed once."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    if port is None or not parsed.host:
        return None
    return parsed.host.lower().strip("[]"), port


@dataclass(frozen=True, slots=True)
class OwnAddresses:
    """Where evalsite serves: its ports (``PORT``) and the host it is bound to (``EVALSITE_HOST``)."""

    ports: frozenset[int]
    hosts: frozenset[str] = frozenset()

    def _target(self, url: str) -> tuple[str, int] | None:
        """``(host, port)`` of a URL on one of our ports, else None (the quick answer for every other call)."""
        target = _host_and_port(url)
        return target if target is not None and target[1] in self.ports else None

    def _ours(self, host: str, port: int) -> bool:
        if host in self.hosts or host == "localhost" or host.endswith(".localhost"):
            return True
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return False  # not resolvable: no request can be sent there either
        return any(is_this_machine(info[4][0]) for info in infos)

    def refusal(self, url: str, what: str) -> str | None:
        """Why ``what`` (``custom model 'x'``, ```$call```) may not be sent to ``url``, or None."""
        target = self._target(url)
        if target is None or not self._ours(*target):
            return None
        host, port = target
        shown = f"[{host}]" if ":" in host else host
        return (f"{what} is not sent: its url goes to {shown}:{port}, which is evalsite itself (this machine, on "
                f"the port evalsite serves), and nothing a run sends may reach evalsite's own pages or API. Point "
                f"it at the model's or service's own server. No request was sent.")

    async def refusal_async(self, url: str, what: str) -> str | None:
        """:meth:`refusal` from the event loop: a name on one of our ports is looked up on a thread."""
        target = self._target(url)
        if target is None:
            return None
        return await asyncio.to_thread(self.refusal, url, what)
