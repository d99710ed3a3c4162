"""ASGI entry point: evalsite.asgi.application (what `make run` serves: evalsite/gunicorn.conf.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

django_application = get_asgi_application()

from evalsite.serving import BoundedBody  # noqa: E402  (after Django is set up)

application = BoundedBody(django_application)
