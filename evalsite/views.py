from django.http import HttpResponse
from django.views.decorators.http import require_safe


@require_safe
def healthz(request):
    """For scripts waiting for the server: answers once the app is loaded."""
    return HttpResponse("ok", content_type="text/plain")
