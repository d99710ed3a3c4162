"""A lean httpx transport: HTTP/1.1 with keep-alive over asyncio streams.

Why not httpx's default transport: with tens of calls in flight to one host,
httpcore's pool rescans every connection (polling each socket) for every
request, and without sniffio installed it also retries a failed import on
every lock; together that cost ~4 ms of CPU per call here and capped a run at
0.7 of what the machine can do. This transport keeps idle connections per
origin in a stack and hands them out in O(1); concurrency is already bounded
by the router's semaphores.

Two entrances share one exchange: ``post``, which the router's chat calls use
directly (httpx's client machinery -- cookies, auth hooks, redirects, URL
merging -- cost a quarter of a worker's CPU on a judged run), and the httpx
transport interface for everything else. Header lines are checked for line
breaks (a blueprint's custom headers must not start a request of their own).

It speaks what LLM APIs need: one request, a body of bytes, a response with
``Content-Length``, chunked encoding, or read-to-close; TLS through the same
default SSL context as httpx; gzip is decoded. Requests that must go
through an HTTP proxy use httpx's own transport instead (see
``proxy_configured``). The router's ``asyncio.timeout`` bounds every call;
this transport also applies httpx's connect and read timeouts.

A connection is reused only after a complete response that allows it; any
failure or cancellation closes it, so a half-read answer never leaks into
the next call.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
import zlib
from typing import Mapping

import httpx

_IDLE_SECONDS = 20.0  # servers close idle keep-alive connections after 5-60 s; drop ours first
_MAX_IDLE_PER_ORIGIN = 512
_PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def proxy_configured(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` (the caller's environment) names a proxy."""
    return any(environ.get(name) for name in _PROXY_VARIABLES)


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float) -> bool:
        return (not self.reader.at_eof() and not self.writer.is_closing()
                and now - self.idle_since < _IDLE_SECONDS)

    def close(self) -> None:
        self.writer.close()


class PooledTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, _Target] = {}  # parsed URLs: a run posts to a handful, thousands of times

    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        return self._ssl_context

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The httpx entrance (embeddings, a proxy-free client); the router's calls use ``post``."""
        url = request.url
        timeouts = request.extensions.get("timeout") or {}
        body = await request.aread()
        head = _request_head(request.method, url.raw_path, request.headers.raw)
        status, reason, headers, content = await self._exchange(
            (url.scheme, url.host, url.port), head + body, request.method, timeouts, request)
        return httpx.Response(status, headers=headers, content=content, request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason})

    async def post(self, url: str, headers: Mapping[str, str], body: bytes, *, timeout_s: float | None,
                   connect_timeout_s: float) -> Answer:
        """POST ``body`` to ``url``, straight to the connection: no client machinery (cookies, auth
        hooks, redirects, URL merging), which cost more CPU per call than the exchange itself. ``timeout_s``
        bounds reading the answer; None: the caller bounds the whole call itself (the router does)."""
        target = self._targets.get(url)
        if target is None:
            target = self._targets[url] = _Target.of(url)
        lines = [b"POST " + target.path + b" HTTP/1.1", b"Host: " + target.host_header, _FIXED_HEADERS,
                 b"Content-Length: " + str(len(body)).encode("ascii")]
        lines.extend(_header_line(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items())
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        status, _, raw_headers, content = await self._exchange(
            target.origin, head + body, "POST", {"connect": connect_timeout_s, "read": timeout_s}, None)
        return Answer(status, raw_headers, _decoded(raw_headers, content))

    async def _exchange(self, origin: tuple[str, str, int | None], data: bytes, method: str, timeouts: dict,
                        request: httpx.Request | None) -> tuple[int, bytes, list, bytes]:
        """Send one request's bytes and read its response, on an idle connection or a new one."""
        scheme, host, port = origin
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        origin = (scheme, host, port or (443 if scheme == "https" else 80))
        connection = self._take_idle(origin) or await self._connect(origin, timeouts.get("connect"), request)
        reusable = False
        try:
            connection.writer.write(data)
            await connection.writer.drain()
            read_timeout = timeouts.get("read")
            if read_timeout is None:
                status, reason, headers, content, reusable = await _read_response(connection.reader, method,
                                                                                   request)
            else:
                try:
                    async with asyncio.timeout(read_timeout):
                        status, reason, headers, content, reusable = await _read_response(
                            connection.reader, method, request)
                except TimeoutError:
                    raise httpx.ReadTimeout("timed out waiting for the response", request=request) from None
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise httpx.RemoteProtocolError("Server disconnected without sending a complete response.",
                                            request=request) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError("The response headers are too large.", request=request) from exc
        finally:
            if reusable:
                self._give_back(origin, connection)
            else:
                connection.close()
        return status, reason, headers, content

    def _take_idle(self, origin) -> _Connection | None:
        stack = self._idle.get(origin)
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            if connection.usable(now):
                return connection
            connection.close()
        return None

    def _give_back(self, origin, connection: _Connection) -> None:
        stack = self._idle.setdefault(origin, [])
        if len(stack) >= _MAX_IDLE_PER_ORIGIN:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        stack.append(connection)

    async def _connect(self, origin, timeout: float | None, request: httpx.Request) -> _Connection:
        scheme, host, port = origin
        kwargs = {"ssl": self._ssl(), "server_hostname": host} if scheme == "https" else {}
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 20, **kwargs)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {host}:{port} in time", request=request) from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"could not connect to {host}:{port}: {exc}", request=request) from exc
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        for stack in self._idle.values():
            for connection in stack:
                connection.close()
        self._idle.clear()


# What every direct ``post`` sends besides its own headers (httpx sends the same; no Accept-Encoding,
# so a server answers uncompressed, and a gzip answer is decoded anyway).
_FIXED_HEADERS = (b"Accept: */*\r\nConnection: keep-alive\r\nUser-Agent: python-httpx/"
                  + httpx.__version__.encode("ascii"))


class _Target:
    __slots__ = ("origin", "path", "host_header")

    def __init__(self, origin, path: bytes, host_header: bytes):
        self.origin, self.path, self.host_header = origin, path, host_header

    @classmethod
    def of(cls, url: str) -> _Target:
        parsed = httpx.URL(url)
        default_port = {"http": 80, "https": 443}.get(parsed.scheme)
        host = parsed.raw_host + (b"" if parsed.port in (None, default_port) else b":%d" % parsed.port)
        return cls((parsed.scheme, parsed.host, parsed.port), parsed.raw_path, host)


class Answer:
    """A response to a direct ``post``: status, body, and headers (parsed only when asked for)."""

    __slots__ = ("status_code", "_raw_headers", "content")

    def __init__(self, status_code: int, raw_headers: list[tuple[bytes, bytes]], content: bytes):
        self.status_code, self._raw_headers, self.content = status_code, raw_headers, content

    @property
    def headers(self) -> httpx.Headers:
        return httpx.Headers(self._raw_headers)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def _decoded(headers: list[tuple[bytes, bytes]], content: bytes) -> bytes:
    for name, value in headers:
        if name.lower() == b"content-encoding" and value.strip().lower() in (b"gzip", b"x-gzip", b"deflate"):
            try:
                return zlib.decompress(content, 47)  # gzip or zlib, told apart by the header
            except zlib.error as exc:
                raise httpx.DecodingError(f"could not decode the {value.decode('latin-1')} body: {exc}") from None
    return content


_UNSAFE = re.compile(rb"[\r\n\0]")


def _header_line(name: bytes, value: bytes) -> bytes:
    """One header line; a line break in a name or value (a blueprint's custom headers) would start
    a request of its own, so it is refused."""
    if _UNSAFE.search(name) or _UNSAFE.search(value) or not name or b":" in name:
        raise httpx.LocalProtocolError(f"the header {name[:40].decode('latin-1')!r} has a line break, a NUL or a "
                                       "colon in its name or value; it was not sent")
    return name + b": " + value


def _request_head(method: str, raw_path: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    lines = [method.encode("ascii") + b" " + raw_path + b" HTTP/1.1"]
    lines.extend(_header_line(name, value) for name, value in headers)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _read_response(reader: asyncio.StreamReader, method: str, request: httpx.Request | None):
    """``(status, reason, headers, body, reusable)`` of one response."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].split(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise httpx.RemoteProtocolError(f"not an HTTP response: {status_line[:80]!r}", request=request)
        status = int(parts[1])
        if not 100 <= status < 200 or status == 101:
            break  # skip interim answers such as 100 Continue
    version, reason = parts[0], (parts[2] if len(parts) > 2 else b"")
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    connection_header = b""
    for line in header_lines:
        name, _, value = line.partition(b":")
        name, value = name.strip(), value.strip()
        headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length":
            length = int(value)
        elif lowered == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif lowered == b"connection":
            connection_header = value.lower()
    keep_alive = (connection_header != b"close") if version == b"HTTP/1.1" else (connection_header == b"keep-alive")
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif chunked:
        body = await _read_chunked(reader)
    elif length is not None:
        body = await reader.readexactly(length)
    else:
        body = await reader.read()  # delimited by the server closing the connection
        keep_alive = False
    return status, reason, headers, body, keep_alive


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
