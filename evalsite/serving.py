"""How `make run` serves the site: an asynchronous front (uvicorn workers under gunicorn), so a slow client
holds no worker.

With threads per connection (gthread), a client that trickled its headers or its body held a thread the
whole time: sixteen such connections took the site down before any authentication. Under uvicorn a
connection that is still arriving costs a coroutine; Django's view runs on a thread of its own only once
the whole request is in (``evalsite/gunicorn.conf.py``, ``evalsite/asgi.py``).

Django runs a sync view chain under ASGI on one thread per process (``thread_sensitive``), so one page waiting
(on SQLite's write lock, say) held every other page of its process behind it: :class:`ThreadedASGIHandler` runs
each request, once it has arrived whole, on a pool of ``EVALSITE_WEB_THREADS`` threads, as a threaded WSGI
server did, with the same connection handling.

Two more things keep ASGI as safe and as lean as the threads were:

* :class:`BoundedBody` (the ASGI app's outer layer): a request body is refused with 413 past what the site
  would ever read (Django reads an ASGI request's whole body before any view or access check runs, and
  would otherwise spool any size to disk for anyone);
* :class:`StreamFromThread` (a Django middleware): a streamed response (the offline report, static files)
  is read chunk by chunk on the request's thread, where Django would otherwise read it all into memory
  first.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections
from django.urls import set_script_prefix

_END = object()
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def view_threads() -> ThreadPoolExecutor:
    """The process's pool of threads that run views and make streamed responses' chunks."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=settings.EVALSITE_WEB_THREADS, thread_name_prefix="evalsite-view")
        return _POOL


class ThreadedASGIHandler(ASGIHandler):
    """Django's ASGI handler whose requests, each once its body has arrived whole, run on :func:`view_threads`
    through Django's synchronous handler (the middleware and views as under WSGI)."""

    def __init__(self):
        super().__init__()
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await asyncio.get_running_loop().run_in_executor(view_threads(), self._respond, request)

    def _respond(self, request):
        close_old_connections()  # as a WSGI server's request_started would on this thread
        set_script_prefix(request.META.get("SCRIPT_NAME") or "/")
        return self._sync.get_response(request)


class StreamFromThread:
    """Under ASGI, a streamed response's chunks are made one at a time on the request's own thread (its database
    connection), instead of Django's default of making them all, into memory, before the first is sent."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if getattr(response, "streaming", False) and not response.is_async and isinstance(request, ASGIRequest):
            response.streaming_content = _chunks(response.streaming_content)
        return response


async def _chunks(iterator):
    iterator = iter(iterator)
    loop = asyncio.get_running_loop()
    while (chunk := await loop.run_in_executor(view_threads(), next, iterator, _END)) is not _END:
        yield chunk


def max_body_bytes() -> int:
    """The largest body the site reads: a form or JSON body (DATA_UPLOAD_MAX_MEMORY_SIZE, which follows the
    blueprint text limit) or as many uploaded files as a form may carry, each at the import limit."""
    from blueprints.forms import MAX_UPLOAD_BYTES

    return max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
               (settings.DATA_UPLOAD_MAX_NUMBER_FILES or 100) * MAX_UPLOAD_BYTES + (1 << 20))


class BoundedBody:
    """ASGI: answers 413 to a request whose body is larger than :func:`max_body_bytes`, by its Content-Length
    before reading any of it, or as soon as a body without one (chunked) passes the limit."""

    def __init__(self, app):
        self.app = app
        self.limit: int | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.limit is None:
            self.limit = max_body_bytes()
        limit = self.limit
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                try:
                    too_large = int(value) > limit
                except ValueError:
                    too_large = False
                if too_large:
                    return await _refuse(scope, send, limit)
        received = 0
        refused = False

        async def bounded_receive():
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    return {"type": "http.disconnect"}  # Django stops reading and answers nothing
            return message

        await self.app(scope, bounded_receive, send)
        if refused:
            await _refuse(scope, send, limit)


async def _refuse(scope, send, limit: int) -> None:
    message = (f"the body is larger than this server reads ({limit:,} bytes); send less, or raise "
               "EVALSITE_MAX_BLUEPRINT_CHARS on the server (the limit follows it)")
    if scope.get("path", "").startswith("/api/"):
        body, kind = json.dumps({"error": message, "limit": limit}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
