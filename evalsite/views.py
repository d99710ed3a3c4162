from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe


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
