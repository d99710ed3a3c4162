"""A reviewer's annotation of one response: thumbs up or down, and a comment."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from .models import Annotation, Response
from .records import bump_results_keeping_cells


class AnnotationRefused(Exception):
    """The annotation cannot be saved; the message names the field and the fix."""


def save_annotation(response: Response, *, thumbs: str, comment: str, who: str = "") -> Annotation | None:
    """Set a response's thumbs ("up", "down" or "" for none) and comment; with neither, the annotation goes."""
    value = {**{word: n for n, word in Annotation.WORDS.items()}, "": None}.get((thumbs or "").strip().lower(), "bad")
    if value == "bad":
        raise AnnotationRefused(f"thumbs must be up, down or empty, not {thumbs[:20]!r}")
    comment = (comment or "").replace("\r\n", "\n").strip()
    if len(comment) > Annotation.MAX_COMMENT_CHARS:
        raise AnnotationRefused(f"the comment has {len(comment):,} characters; keep it under "
                                f"{Annotation.MAX_COMMENT_CHARS:,} (link to a longer note instead)")
    who = (who or "").strip()[:150]
    with transaction.atomic():
        bump_results_keeping_cells(response.run_id)  # the grid flags annotated cells; no score moves
        if value is None and not comment:
            Annotation.objects.filter(response=response).delete()
            return None
        annotation, _ = Annotation.objects.update_or_create(
            response=response, defaults={"thumbs": value, "comment": comment, "who": who,
                                         "updated_at": timezone.now()})
    return annotation
