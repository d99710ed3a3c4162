"""``{{ url|safe_url }}``: a URL an author wrote, when it may be a link (http, https, mailto), else empty."""

from django import template

from evalsite.security import safe_url as _safe_url

register = template.Library()


@register.filter
def safe_url(value) -> str:
    return _safe_url(value) or ""
