import pytest

from blueprints.models import Blueprint

VALID = """\
title: Capital cities
description: Checks **capitals**.
tags: [geography, facts]
models:
  - openai:gpt-4.1-mini
---
- id: france
  prompt: What is the capital of France?
  should:
    - $icontains: paris
    - Names Paris as the capital.
"""


@pytest.fixture
def make_blueprint(db):
    def make(text=VALID, slug="capitals", **kwargs):
        blueprint = Blueprint.objects.create(slug=slug, title="")
        blueprint.save_revision(text, **kwargs)
        return blueprint

    return make


def htmx(**extra):
    return {"HTTP_HX_REQUEST": "true", **extra}
