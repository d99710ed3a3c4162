"""A time limit for every page (EVALSITE_PAGE_TIMEOUT_S).

Django has none, and a sync view cannot be stopped from outside; gunicorn's worker timeout kills the whole
worker (every request it holds). So each request gets a deadline here, and the paths whose work grows with
what a user controls check it: the estimate's cache look-up stops at it (its figure then says "at least"
cached, ``runs.start.estimate_start``), and a path that cannot give a partial answer calls :func:`check`,
which ends the request with a "took too long" page (503; JSON under /api/) naming the setting.
"""

from __future__ import annotations

import contextvars
import time

from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("evalsite_page_deadline", default=None)


class PageTooSlow(Exception):
    """The request passed its deadline; ``what`` is the work that was stopped (``estimating the run``)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def deadline() -> float | None:
    """This request's deadline as a ``time.monotonic()`` value; None outside a request (commands, workers)."""
    return _DEADLINE.get()


def check(what: str) -> None:
    """Raise PageTooSlow when this request's time is up."""
    end = _DEADLINE.get()
    if end is not None and time.monotonic() >= end:
        raise PageTooSlow(what)


def too_slow_message(what: str) -> str:
    return (f"This page took too long: {what} passed the page time limit of {settings.EVALSITE_PAGE_TIMEOUT_S:g} s "
            f"(EVALSITE_PAGE_TIMEOUT_S) and was stopped. Ask for less (fewer models, trials or prompts), or raise "
            f"the limit.")


class DeadlineMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _DEADLINE.set(time.monotonic() + settings.EVALSITE_PAGE_TIMEOUT_S)
        try:
            return self.get_response(request)
        finally:
            _DEADLINE.reset(token)

    def process_exception(self, request, exception):
        if not isinstance(exception, PageTooSlow):
            return None
        message = too_slow_message(exception.what)
        if request.path.startswith("/api/"):
            return JsonResponse({"error": message}, status=503)
        return render(request, "too_slow.html", {"message": message}, status=503)
