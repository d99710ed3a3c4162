"""What every page of the runs app shares and none owns: the Content-Security-Policy of pages that show model
output, and the blueprint a run pinned as a page reads it (None when its revision no longer parses). Below every
door (views, the Pairs pages, the pages across runs), so that none of them imports another."""

from __future__ import annotations

from functools import wraps

from . import spec as run_spec
from .models import Run

PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def with_csp(view):
    """Pages that show model output: nothing may load from elsewhere, even if sanitising ever misses something."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        return response

    return wrapper


def blueprint_of(run: Run):
    """The blueprint ``run`` pinned, or None: a revision that no longer parses cannot have run; a page shows
    what is stored."""
    try:
        return run_spec.parsed_blueprint(run.revision)
    except run_spec.RunRefused:
        return None
