"""ASGI entry point: evalsite.asgi.application (what `make run` serves: evalsite/gunicorn.conf.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
django.setup(set_prefix=False)

from evalsite.serving import BoundedBody, ThreadedASGIHandler  # noqa: E402  (after Django is set up)

django_application = ThreadedASGIHandler()
application = BoundedBody(django_application)
