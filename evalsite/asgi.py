"""ASGI entry point: evalsite.asgi.application (what `make run` serves: evalsite/gunicorn.conf.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
django.setup(set_prefix=False)

from evalsite.serving import BoundedBody, ThreadedASGIHandler  # noqa: E402  (after Django is set up)


def load_the_pages() -> None:
    """Import every view (resolving the URLs does) and the statistics the results pages use. gunicorn loads this
    module in its master and forks the web processes from it (``preload_app``, evalsite/gunicorn.conf.py), so
    each process starts with them instead of importing them on its first requests: 0.5 s of CPU for the views
    and 0.28 s for SciPy's special functions on a 2-core machine, paid once per server instead of once per
    process, and their memory shared."""
    import scipy.special  # noqa: F401
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - the URL configuration, and every view module with it


load_the_pages()

django_application = ThreadedASGIHandler()
application = BoundedBody(django_application)
