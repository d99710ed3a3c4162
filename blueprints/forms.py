import json
from pathlib import PurePosixPath

from django import forms
from django.core.exceptions import ValidationError

from blueprints.models import BLUEPRINT_ID_MAX_LENGTH, Blueprint, suggest_blueprint_id, validate_blueprint_id

MAX_UPLOAD_BYTES = 5 * 1024 * 1024


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
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


def _read_upload(upload) -> bytes | None:
    """An uploaded file's bytes, or None when it is larger than an import takes (it is listed as left out)."""
    if upload.size > MAX_UPLOAD_BYTES:
        return None
    return upload.read()


class ImportForm(forms.Form):
    """Files chosen one by one, a folder (its files' paths relative to it come in ``folder_paths``, a JSON list in
    the files' order, filled in by static/js/import.js), or pasted text."""

    files = MultipleFileField(
        required=False, label="Files",
        help_text="One or many .yml, .yaml or .json blueprints and suites, with the files they name (judge prompts, "
                  "test rows, fixtures, models/*.json). Each file's name gives its blueprint's id.",
    )
    folder = MultipleFileField(
        required=False, label="Or a folder",
        widget=MultipleFileInput(attrs={"webkitdirectory": True, "directory": True, "data-folder-input": True}),
        help_text="A folder of suites with their files, read as the import_blueprints command reads it: ids come "
                  "from the paths inside the folder (sub/name.yml becomes sub__name).",
    )
    folder_paths = forms.CharField(required=False, widget=forms.HiddenInput(attrs={"data-folder-paths": True}))
    text = forms.CharField(
        required=False, strip=False, label="Or paste a blueprint",
        widget=forms.Textarea(attrs={"class": "code", "rows": 12, "spellcheck": "false"}),
    )

    def clean_files(self):
        """``(name, bytes or None)`` of each file chosen one by one."""
        return [(upload.name, _read_upload(upload)) for upload in self.cleaned_data["files"]]

    def clean_folder(self):
        return [(upload.name, _read_upload(upload)) for upload in self.cleaned_data["folder"]]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        cleaned["folder_name"], cleaned["folder"] = _folder_layout(cleaned.get("folder") or [],
                                                                   cleaned.get("folder_paths") or "")
        if not cleaned.get("files") and not cleaned["folder"] and not (cleaned.get("text") or "").strip():
            raise ValidationError("Choose one or more files, or paste a blueprint. A whole folder can be chosen too.")
        return cleaned


def _folder_layout(uploads: list, paths_json: str) -> tuple[str, list]:
    """``(folder name, [(path inside the folder, bytes)])`` for a chosen folder. The browser posts each file's path
    (``team-a/judges/safety.md``, the chosen folder first) beside the files; without them (no JavaScript) the files
    are known by their names only, as files chosen one by one are."""
    try:
        paths = json.loads(paths_json) if paths_json else []
    except ValueError:
        paths = []
    if (not isinstance(paths, list) or len(paths) != len(uploads)
            or not all(isinstance(p, str) and p for p in paths)):
        return "", uploads
    parts = [PurePosixPath(p.replace("\\", "/")).parts for p in paths]
    tops = {p[0] for p in parts if p}
    if len(tops) != 1 or any(len(p) < 2 for p in parts):
        return "", [("/".join(p), data) for p, (_, data) in zip(parts, uploads)]
    return tops.pop(), [("/".join(p[1:]), data) for p, (_, data) in zip(parts, uploads)]


class ImportConflictForm(forms.Form):
    """What to do with a file whose id belongs to another suite (the import page asks)."""

    path = forms.CharField(max_length=1000, widget=forms.HiddenInput)
    text = forms.CharField(strip=False, max_length=MAX_UPLOAD_BYTES, widget=forms.HiddenInput)
    files = forms.CharField(required=False, strip=False, widget=forms.HiddenInput)  # its companion files, JSON
    folder = forms.CharField(required=False, max_length=300, widget=forms.HiddenInput)  # the imported folder's name
    choice = forms.ChoiceField(choices=[("new-id", "Import it as a new blueprint with the id"),
                                        ("revision", "Import it anyway, as a new revision of the existing blueprint")],
                               widget=forms.RadioSelect, initial="new-id")
    new_id = IdField(required=False, label="New id", validators=[])  # checked below, when it is the choice
    # The blueprint a new revision would go to: the file's id, or the one that holds the same text.
    target = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    def clean_files(self):
        raw = self.cleaned_data["files"]
        if not raw:
            return {}
        try:
            files = json.loads(raw)
        except ValueError:
            files = None
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise ValidationError("The file's companion files did not come back as they were sent; import it again.")
        return files

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
        if data["choice"] == "revision":
            return f"revision:{data['target']}" if data.get("target") else "revision"
        return f"id:{data['new_id']}"


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
