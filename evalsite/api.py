"""What every JSON endpoint shares: errors as ``{"error": ...}``, JSON bodies read strictly, JSON 404/405.

When ``EVALSITE_API_TOKEN`` is set every call needs ``Authorization: Bearer <token>``; without it the API
(like every page) answers only to the loopback address (``evalsite.security.AccessMiddleware``).
Requests that change anything must send JSON (``Content-Type: application/json``): a web page in the
user's browser cannot send that to us without a CORS preflight, which we never grant.
"""

from __future__ import annotations

import json
from functools import wraps

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


def api_view(view):
    """JSON in, JSON out. Who may call is decided for the whole site (evalsite.security.AccessMiddleware)."""
    @csrf_exempt
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "POST" and request.content_type != "application/json" and not _bodiless_from_us(request):
            return error(415, "send a JSON body with Content-Type: application/json")
        try:
            response = view(request, *args, **kwargs)
        except Http404 as exc:  # the API answers JSON, never the site's HTML page
            return error(404, str(exc) or "not found")
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


