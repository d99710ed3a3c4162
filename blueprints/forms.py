from django import forms
from django.core.exceptions import ValidationError

from blueprints.models import BLUEPRINT_ID_MAX_LENGTH, Blueprint, suggest_blueprint_id, validate_blueprint_id

MAX_UPLOAD_BYTES = 5 * 1024 * 1024
UPLOAD_SUFFIXES = (".yml", ".yaml", ".json")


class IdField(forms.CharField):
    """A blueprint id typed in the browser: the one rule (``validate_blueprint_id``) says what is wrong, with an id
    to try, as the API and the commands do; the browser stops typing at the rule's length."""

    def __init__(self, **kwargs):
        kwargs.setdefault("label", "Id")
        kwargs.setdefault("validators", [validate_blueprint_id])
        kwargs.setdefault("widget", forms.TextInput(attrs={"maxlength": BLUEPRINT_ID_MAX_LENGTH,
                                                           "autocapitalize": "off", "spellcheck": "false"}))
        super().__init__(**kwargs)


def _taken(slug: str, exclude_pk=None) -> ValidationError:
    return ValidationError(f"The id '{slug}' is already used by another blueprint; try "
                           f"'{suggest_blueprint_id(slug, exclude_pk=exclude_pk)}'.")


STARTER_TEXT = """\
title: My new blueprint
description: |
  What this blueprint checks, in a sentence or two. Markdown works here.
tags: [draft]
models:
  - openai:gpt-4.1-mini
---
- id: first-prompt
  prompt: Ask the model something here.
  should:
    - A sentence a judge checks the response against.
    - $icontains: a word the response must contain
"""


class EditorForm(forms.Form):
    text = forms.CharField(
        strip=False, required=False,
        widget=forms.Textarea(attrs={"class": "code", "spellcheck": "false", "rows": 30, "autocapitalize": "off",
                                     "autocomplete": "off", "data-code-editor": "yaml"}),
    )
    base_revision = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def clean_text(self):
        text = self.cleaned_data["text"].replace("\r\n", "\n")
        if not text.strip():
            raise ValidationError("The blueprint is empty: write at least a title and one prompt.")
        return text


class NewBlueprintForm(EditorForm):
    slug = IdField(
        required=False,
        help_text="Leave empty to make one from the title. Used in addresses and results.",
    )

    def clean_slug(self):
        slug = self.cleaned_data["slug"].strip()
        if slug and Blueprint.objects.filter(slug=slug).exists():
            raise _taken(slug)
        return slug


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ",".join(UPLOAD_SUFFIXES)}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    files = MultipleFileField(
        required=False, label="Files",
        help_text="One or many .yml, .yaml or .json blueprints. Each file's name gives its blueprint's id.",
    )
    text = forms.CharField(
        required=False, strip=False, label="Or paste a blueprint",
        widget=forms.Textarea(attrs={"class": "code", "rows": 12, "spellcheck": "false"}),
    )

    def clean_files(self):
        files = self.cleaned_data["files"]
        decoded = []
        for upload in files:
            name = upload.name
            if not name.lower().endswith(UPLOAD_SUFFIXES):
                raise ValidationError(f"'{name}' is not a .yml, .yaml or .json file.")
            if upload.size > MAX_UPLOAD_BYTES:
                raise ValidationError(f"'{name}' is larger than 5 MB.")
            data = upload.read()
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            try:
                decoded.append((name, data.decode("utf-8").replace("\r\n", "\n")))
            except UnicodeDecodeError:
                raise ValidationError(f"'{name}' is not UTF-8 text; save it as UTF-8 and try again.") from None
        return decoded

    def clean(self):
        cleaned = super().clean()
        if not self.errors and not cleaned.get("files") and not (cleaned.get("text") or "").strip():
            raise ValidationError("Choose one or more files, or paste a blueprint.")
        return cleaned


class ImportConflictForm(forms.Form):
    """What to do with a file whose id belongs to another suite (the import page asks)."""

    path = forms.CharField(max_length=1000, widget=forms.HiddenInput)
    text = forms.CharField(strip=False, max_length=MAX_UPLOAD_BYTES, widget=forms.HiddenInput)
    choice = forms.ChoiceField(choices=[("new-id", "Import it as a new blueprint with the id"),
                                        ("revision", "Import it anyway, as a new revision of the existing blueprint")],
                               widget=forms.RadioSelect, initial="new-id")
    new_id = IdField(required=False, label="New id", validators=[])  # checked below, when it is the choice

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("choice") == "new-id":
            new_id = (cleaned.get("new_id") or "").strip()
            if not new_id:
                self.add_error("new_id", "Give the new blueprint an id.")
            else:
                try:
                    validate_blueprint_id(new_id)
                except ValidationError as exc:
                    self.add_error("new_id", exc)
                cleaned["new_id"] = new_id
        return cleaned

    def as_choice(self) -> str:
        data = self.cleaned_data
        return "revision" if data["choice"] == "revision" else f"id:{data['new_id']}"


class RenameForm(forms.Form):
    slug = IdField()

    def __init__(self, *args, blueprint, **kwargs):
        super().__init__(*args, **kwargs)
        self.blueprint = blueprint

    def clean_slug(self):
        slug = self.cleaned_data["slug"].strip()
        if Blueprint.objects.filter(slug=slug).exclude(pk=self.blueprint.pk).exists():
            raise _taken(slug, exclude_pk=self.blueprint.pk)
        return slug


class TryForm(forms.Form):
    prompt = forms.ChoiceField(label="Prompt")
    response = forms.CharField(
        strip=False, label="A response to score",
        widget=forms.Textarea(attrs={"rows": 10, "placeholder": "Paste what a model answered…"}),
    )
    with_judges = forms.BooleanField(required=False, label="Ask the judges about the judged points (model calls)")
    text = forms.CharField(required=False, strip=False, widget=forms.HiddenInput)  # unsaved editor text

    def __init__(self, *args, prompt_ids=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["prompt"].choices = [(pid, pid) for pid in prompt_ids]


class CompareForm(forms.Form):
    a = forms.IntegerField(min_value=1, label="From revision")
    b = forms.IntegerField(min_value=1, label="To revision")


class RunForm(forms.Form):
    """What the run button asks, posted to the runs app (runs.views.start).

    Every box starts ticked: posted as it is, the run is the blueprint's evaluation
    (the runs app compares the ticked boxes with the ``*_offered`` ones and passes on
    only what the user changed), the same as from the CLI or the API.
    """

    models = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Models", required=False)
    add_models = forms.CharField(label="Add models", required=False,
                                 help_text="provider:model ids or collection names, separated by commas")
    judges = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, label="Judges", required=False)
    trials = forms.IntegerField(label="Trials", required=False, min_value=1, max_value=100,
                                help_text="responses per prompt and model; empty: the blueprint's")
    fresh = forms.BooleanField(label="Fresh: ask every model again, not the response cache", required=False)

    def __init__(self, *args, model_ids=(), judges=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["models"].choices = [(m, m) for m in model_ids]
        self.fields["judges"].choices = [(j.judge_id, f"{j.judge_id} · {j.approach}") for j in judges]
        self.initial.setdefault("models", list(model_ids))
        self.initial.setdefault("judges", [j.judge_id for j in judges])
