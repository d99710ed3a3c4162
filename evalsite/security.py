"""What keeps a page safe to open: links only to the web and mail, a strict content policy, and who may come in.

- ``safe_url``: only ``http``, ``https`` and ``mailto`` URLs become links; anything an author
  or a model wrote that is not (``javascript:``, ``data:``, a bare path) is shown as text.
- ``SecurityHeadersMiddleware``: every HTML page gets a Content-Security-Policy: scripts only
  from our own static files (no inline script at all), images only from us or ``data:``,
  nothing fetched from anywhere else, no plugins, no framing. Inline *styles* are allowed:
  the editor (Ace) and htmx add style elements, and with every fetch limited to our origin a
  style cannot send anything out. A response that sets its own policy keeps it.
- ``AccessMiddleware``: who may use the site at all. Without ``EVALSITE_API_TOKEN`` only the
  loopback address may (``127.0.0.1``, ``::1``, and ``::ffff:127.0.0.1``); with it, every page
  and API call needs the token, as ``Authorization: Bearer <token>`` or, in a browser, a
  signed cookie that ``/signin`` sets. ``/healthz`` and static files are always open.
  Loopback is not enough to *change* anything through the API (POST, PUT, PATCH, DELETE under
  ``/api/``): that needs the token, or a page of this site in the browser with its CSRF token,
  since any program on this machine that can be made to send a request (a blueprint's custom
  model once could) is on loopback too. Reading (GET) stays open on loopback.
- ``EngineRequestMiddleware``: a request carrying the engine's mark (``X-Evalsite-Engine``,
  which every request a run sends carries: runs/engine/providers/own.py) is refused, whatever
  its address or token: a run never drives this site.
"""

from __future__ import annotations

import hmac
import html
import ipaddress
import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.middleware.csrf import CsrfViewMiddleware
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from runs.engine.providers.own import ENGINE_HEADER

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f]+")

CSP = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

TOKEN_COOKIE = "evalsite_access"
_COOKIE_SALT = "evalsite.access"
OPEN_PATHS = ("/healthz", "/signin")


def safe_url(value: object) -> str | None:
    """``value`` when it is an absolute http, https or mailto URL, else None (it is then shown as text)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > 4000:
        return None
    # Browsers drop tabs, newlines and control characters inside a scheme ("java\tscript:").
    probe = _INVISIBLE.sub("", text)
    try:
        parts = urlsplit(probe)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in SAFE_SCHEMES:
        return None
    if scheme in ("http", "https") and not parts.netloc:
        return None
    return text


def is_loopback(address: str | None) -> bool:
    try:
        ip = ipaddress.ip_address((address or "").split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


class SecurityHeadersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CSP
        response.setdefault("Referrer-Policy", "same-origin")
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response


def _has_token(request, token: str) -> bool:
    given = request.headers.get("Authorization", "")
    if given.startswith("Bearer ") and hmac.compare_digest(given[7:].strip(), token):
        return True
    cookie = request.COOKIES.get(TOKEN_COOKIE)
    if not cookie:
        return False
    try:
        value = signing.loads(cookie, salt=_COOKIE_SALT, max_age=60 * 60 * 24 * 30)
    except signing.BadSignature:
        return False
    return isinstance(value, str) and hmac.compare_digest(value, _token_digest(token))


def _token_digest(token: str) -> str:
    """What the cookie carries: a digest of the token (never the token), so a changed token signs everyone out."""
    return hmac.new(settings.SECRET_KEY.encode(), token.encode(), "sha256").hexdigest()


_ENGINE_META = "HTTP_" + ENGINE_HEADER.upper().replace("-", "_")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class EngineRequestMiddleware:
    """Refuses every request the engine sent (its mark), should one reach us past the send-time check."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if _ENGINE_META in request.META:
            return JsonResponse({"error": "this request came from evalsite's own engine (a blueprint's custom model, "
                                          "judge, embeddings model or `$call` service whose url points at this "
                                          "site); a run never calls evalsite's own pages or API"}, status=403)
        return self.get_response(request)


def _csrf_view(request):  # pragma: no cover - never called: stands for a view that is not csrf_exempt
    raise AssertionError


_csrf = CsrfViewMiddleware(lambda request: None)


def _changes_api_without_token(request) -> bool:
    """A state-changing API call from loopback with neither the token nor a page's CSRF token."""
    if request.method in SAFE_METHODS or not request.path.startswith("/api/"):
        return False
    _csrf.process_request(request)  # reads the CSRF cookie, as Django's own middleware does after us
    return _csrf.process_view(request, _csrf_view, (), {}) is not None


class AccessMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path
        if path.startswith(OPEN_PATHS) or path.startswith(settings.STATIC_URL if settings.STATIC_URL.startswith("/")
                                                          else "/" + settings.STATIC_URL):
            return self.get_response(request)
        token = settings.EVALSITE_API_TOKEN
        api = path.startswith("/api/")
        if token:
            if _has_token(request, token):
                return self.get_response(request)
            if api:
                return JsonResponse({"error": "send Authorization: Bearer <EVALSITE_API_TOKEN>"}, status=401)
            return redirect(f"/signin?next={path}")
        if is_loopback(request.META.get("REMOTE_ADDR")):
            if _changes_api_without_token(request):
                return JsonResponse({"error": "changing something through the API needs EVALSITE_API_TOKEN, even "
                                              "on this machine: set it on the server and send Authorization: "
                                              "Bearer <token> (reading with GET needs no token here)"}, status=403)
            return self.get_response(request)
        message = ("evalsite answers only on the loopback address unless EVALSITE_API_TOKEN is set: set it on the "
                   "server, then sign in with it")
        if api:
            return JsonResponse({"error": message}, status=403)
        return HttpResponseForbidden(message, content_type="text/plain; charset=utf-8")


@require_http_methods(["GET", "POST"])
def signin(request):
    """Sign in with EVALSITE_API_TOKEN: a signed cookie (a digest of the token, not the token) for this browser."""
    token = settings.EVALSITE_API_TOKEN
    target = request.GET.get("next") or request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    if not token:
        return redirect(target)
    error = None
    if request.method == "POST":
        given = request.POST.get("token", "").strip()
        if given and hmac.compare_digest(given, token):
            response = redirect(target)
            response.set_cookie(TOKEN_COOKIE, signing.dumps(_token_digest(token), salt=_COOKIE_SALT),
                                max_age=60 * 60 * 24 * 30, httponly=True, samesite="Strict",
                                secure=request.is_secure())
            return response
        error = "That is not the token this server was started with (EVALSITE_API_TOKEN)."
    return render(request, "signin.html", {"next": target, "error": error}, status=401 if error else 200)


_IMG = re.compile(r"<img\b[^>]*>")
_ATTR = re.compile(r'\b(src|alt)="([^"]*)"')


def defer_outside_images(sanitised_html: str) -> str:
    """Images from other hosts in sanitised HTML become links the reader may click, never loaded by opening a page.

    An author's markdown image could be a tracking pixel; our pages load images only from our own
    origin (the CSP's ``img-src``). ``data:`` images stay inline.
    """
    def replace(match: re.Match[str]) -> str:
        attributes = dict(_ATTR.findall(match.group(0)))
        source = attributes.get("src", "")
        if source.startswith("data:image/"):
            return match.group(0)
        url = safe_url(html.unescape(source))
        alt = attributes.get("alt") or "an image"
        if url is None:
            return f'<span class="outside-image">[image: {alt}]</span>'
        host = urlsplit(url).hostname or "another site"
        return (f'<a class="outside-image" href="{html.escape(url)}" rel="noopener noreferrer nofollow" '
                f'target="_blank">[image: {alt}, from {html.escape(host)}; opens in a new tab]</a>')

    return _IMG.sub(replace, sanitised_html)
