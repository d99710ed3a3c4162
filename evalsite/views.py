import sys

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from django.views.defaults import bad_request as html_bad_request, server_error as html_server_error


@require_safe
def healthz(request):
    """For scripts waiting for the server: answers once the app is loaded."""
    return HttpResponse("ok", content_type="text/plain")


def not_found(request, exception=None):
    """The site's 404: a page in its own layout, or JSON under /api/."""
    reason = str(exception) if exception is not None and not isinstance(exception.args[0] if exception.args else None,
                                                                         dict) else ""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": reason or f"nothing at {request.path}"}, status=404)
    return render(request, "404.html", {"request_path": request.path, "reason": reason}, status=404)


def bad_request(request, exception=None):
    """A request Django refused before any view (a body too large, a host not allowed): JSON under /api/."""
    if request.path.startswith("/api/"):
        from django.core.exceptions import RequestDataTooBig

        from evalsite.api import too_large

        if isinstance(exception, RequestDataTooBig):
            return too_large()
        return JsonResponse({"error": f"bad request: {exception}"[:300] if exception else "bad request"},
                            status=400)
    return html_bad_request(request, exception)


def server_error(request):
    """The server failed (a bug): under /api/ the reason in the API's one shape, never an HTML page."""
    if request.path.startswith("/api/"):
        failure = sys.exc_info()[0]
        what = f" ({failure.__name__})" if failure is not None else ""
        return JsonResponse({"error": f"the server failed while handling this request{what}: a bug, not "
                                      "something the request can fix; the server's log has the details"},
                            status=500)
    return html_server_error(request)
