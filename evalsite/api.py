"""What every JSON endpoint shares: errors as ``{"error": ...}``, JSON bodies read strictly, JSON 404/405.

Every error under ``/api/`` has that one shape, whatever made it: a view's refusal, an unknown URL, a
method not allowed, a body too large (413), a chunked body (411: it would not be read), a request the
server could not handle (500; ``evalsite.views``).

When ``EVALSITE_API_TOKEN`` is set every call needs ``Authorization: Bearer <token>``; without it the API
(like every page) answers only to the loopback address (``evalsite.security.AccessMiddleware``).
Requests that change anything must send JSON (``Content-Type: application/json``): a web page in the
user's browser cannot send that to us without a CORS preflight, which we never grant.
"""

from __future__ import annotations

import json
from functools import wraps

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt


def error(status: int, message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def _bodiless_from_us(request) -> bool:
    """A POST with no body that no other site's page sent (a browser names the page's site on every
    cross-site request: ``Origin``, ``Sec-Fetch-Site``); ``curl -X POST`` is one."""
    if request.body:
        return False
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    return origin is None or origin.split("://", 1)[-1] == request.get_host()


def too_large() -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return error(413, f"the body is larger than this server reads ({limit:,} bytes); send less, or raise "
                      "EVALSITE_MAX_BLUEPRINT_CHARS on the server (the limit follows it)", limit=limit)


def chunked(request) -> bool:
    """A body sent in chunks, with no length: Django reads a body by its Content-Length only, so it would be
    taken as empty without a word."""
    return ("chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
            and not request.META.get("CONTENT_LENGTH"))


CHUNKED = ("send the body with a Content-Length header: a chunked body (Transfer-Encoding: chunked) is not "
           "read here (curl sends a length with --data or --data-binary)")


def api_view(view):
    """JSON in, JSON out. Who may call is decided for the whole site (evalsite.security.AccessMiddleware)."""
    @csrf_exempt
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if chunked(request):
            return error(411, CHUNKED)
        try:
            if (request.method == "POST" and request.content_type != "application/json"
                    and not _bodiless_from_us(request)):
                return error(415, "send a JSON body with Content-Type: application/json")
            response = view(request, *args, **kwargs)
        except Http404 as exc:  # the API answers JSON, never the site's HTML page
            return error(404, str(exc) or "not found")
        except RequestDataTooBig:
            return too_large()
        if response.status_code == 405 and not response.get("Content-Type", "").startswith("application/json"):
            allowed = response.get("Allow", "")
            return error(405, f"{request.method} is not allowed here; use {allowed}", allowed=allowed.split(", "))
        return response

    return wrapper


def _refuse_constant(name: str):
    raise ValueError(f"`{name}` is not a JSON value")


def body(request) -> dict | JsonResponse:
    try:
        data = json.loads(request.body or b"{}", parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return error(400, f"the body is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return error(400, "the body is not usable JSON: it is nested too deeply")
    except ValueError as exc:  # NaN/Infinity, an int of thousands of digits, bytes that are not UTF-8
        return error(400, f"the body is not usable JSON: {exc}"[:300])
    if not isinstance(data, dict):
        return error(400, "the body must be a JSON object")
    return data


