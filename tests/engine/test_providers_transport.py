"""The lean HTTP/1.1 transport: framing, keep-alive, and failures, against raw servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import pytest

from runs.engine.providers.settings import settings_from_env
from runs.engine.providers import ProviderSettings, Router
from runs.engine.providers.transport import PooledTransport, proxy_configured


class RawServer:
    """Answers each request with ``respond(n)`` bytes (None: hang; b"": close); counts connections."""

    def __init__(self, respond):
        self.respond = respond
        self.connections = 0
        self.requests = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/x"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                self.requests += 1
                answer = self.respond(self.requests)
                if answer is None:
                    await reader.read()  # hang until the client goes away
                    return
                if answer == b"":
                    return
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower().split(b"\r\n\r\n")[0]:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def ok(body: bytes = b'{"ok": 1}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body


async def post_many(server: RawServer, count: int, **client_kwargs):
    async with httpx.AsyncClient(transport=PooledTransport(), **client_kwargs) as client:
        return [await client.post(server.url, content=b'{"q": 1}') for _ in range(count)]


def run(coro):
    return asyncio.run(coro)


def test_sequential_calls_reuse_one_connection():
    async def main():
        async with RawServer(lambda n: ok(f'{{"n": {n}}}'.encode())) as server:
            responses = await post_many(server, 5)
            return [r.json()["n"] for r in responses], server.connections

    assert run(main()) == ([1, 2, 3, 4, 5], 1)


def test_chunked_bodies_with_extensions_and_trailers_are_joined():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"7;ext=1\r\n{\"ok\": \r\n3\r\n42}\r\n0\r\nX-Trailer: t\r\n\r\n")

    async def main():
        async with RawServer(lambda n: chunked) as server:
            responses = await post_many(server, 2)
            return [r.json() for r in responses], server.connections

    assert run(main()) == ([{"ok": 42}, {"ok": 42}], 1)


def test_a_body_ended_by_close_and_connection_close_are_not_reused():
    async def main():
        async with RawServer(lambda n: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"n\": %d}" % n) as server:
            responses = await post_many(server, 3)
            return [r.json()["n"] for r in responses], server.connections

    assert run(main()) == ([1, 2, 3], 3)


def test_gzip_bodies_are_decoded_and_interim_answers_skipped():
    packed = gzip.compress(b'{"zipped": true}')
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(packed, b"Content-Encoding: gzip\r\n")

    async def main():
        async with RawServer(lambda n: answer) as server:
            response, = await post_many(server, 1)
            return response.status_code, response.json()

    assert run(main()) == (200, {"zipped": True})


def test_a_connection_the_server_closed_while_idle_is_replaced():
    async def main():
        # The server answers, then closes after the first response (without saying so).
        server = RawServer(lambda n: ok())

        async def close_after_one(reader, writer):
            server.connections += 1
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(ok())
            await writer.drain()
            writer.close()

        server._handle = close_after_one
        async with server:
            async with httpx.AsyncClient(transport=PooledTransport()) as client:
                first = await client.post(server.url, content=b"{}")
                await asyncio.sleep(0.05)  # the close reaches the idle connection
                second = await client.post(server.url, content=b"{}")
            return first.status_code, second.status_code, server.connections

    assert run(main()) == (200, 200, 2)


def test_a_refused_connection_and_a_slow_answer_raise_httpx_errors():
    async def refused():
        async with httpx.AsyncClient(transport=PooledTransport()) as client:
            await client.post("http://127.0.0.1:9/v1/x", content=b"{}")

    with pytest.raises(httpx.ConnectError):
        run(refused())

    async def slow():
        async with RawServer(lambda n: None) as server:
            await post_many(server, 1, timeout=httpx.Timeout(0.2))

    with pytest.raises(httpx.ReadTimeout):
        run(slow())


def test_a_cancelled_call_never_leaves_its_answer_for_the_next_one():
    async def main():
        answers = {}

        def respond(n):
            return answers.get(n, ok(f'{{"n": {n}}}'.encode()))

        async with RawServer(respond) as server:
            async with httpx.AsyncClient(transport=PooledTransport()) as client:
                answers[1] = None  # the first call hangs and is cancelled
                task = asyncio.create_task(client.post(server.url, content=b"{}"))
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                second = await client.post(server.url, content=b"{}")
            return second.json(), server.connections

    assert run(main()) == ({"n": 2}, 2)


def test_a_proxy_in_the_environment_hands_requests_to_httpx_itself(monkeypatch):
    assert proxy_configured({"HTTPS_PROXY": "http://proxy:3128"})
    assert not proxy_configured({"NO_PROXY": "*"})
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")  # httpx's own transport reads it

    async def kind(settings=settings_from_env({"HTTPS_PROXY": "http://127.0.0.1:3128"})):
        async with Router(settings) as router:
            return type(router._client._transport).__name__

    assert run(kind()) != "PooledTransport"
    monkeypatch.delenv("HTTPS_PROXY")
    for name in ("HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert run(kind(ProviderSettings())) == "PooledTransport"


def test_the_direct_post_frames_decodes_and_reuses_like_the_client():
    gz = gzip.compress(b'{"zipped": true}')

    def respond(n):
        if n == 1:
            return ok(gz, b"Content-Encoding: gzip\r\n")
        return b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\n{}"

    async def main():
        async with RawServer(respond) as server:
            transport = PooledTransport()
            first = await transport.post(server.url, {"authorization": "Bearer k"}, b'{"q": 1}',
                                         timeout_s=5, connect_timeout_s=5)
            second = await transport.post(server.url, {}, b"{}", timeout_s=5, connect_timeout_s=5)
            await transport.aclose()
            return first, second, server.connections

    first, second, connections = run(main())
    assert (first.status_code, first.content) == (200, b'{"zipped": true}')
    assert (second.status_code, second.headers["retry-after"], second.text) == (429, "7", "{}")
    assert connections == 1


@pytest.mark.parametrize("headers", [{"x-evil": "a\r\nX-Injected: 1"}, {"x-evil\r\nX": "a"}, {"x-nul": "a\0b"}])
def test_a_header_with_a_line_break_is_refused_not_sent(headers):
    async def main():
        async with RawServer(lambda n: ok()) as server:
            transport = PooledTransport()
            try:
                with pytest.raises(httpx.LocalProtocolError, match="not sent"):
                    await transport.post(server.url, headers, b"{}", timeout_s=5, connect_timeout_s=5)
                with pytest.raises(httpx.LocalProtocolError, match="not sent"):
                    async with httpx.AsyncClient(transport=transport) as client:
                        await client.post(server.url, content=b"{}", headers=headers)
            finally:
                await transport.aclose()
            return server.requests

    assert run(main()) == 0
