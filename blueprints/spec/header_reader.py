# Over 500 lines: one reader for every header key (models, judges, custom models, services); each key is a short method.
"""The Weval blueprint header, read into a :class:`Blueprint` (see parse.py for the whole walk)."""

from __future__ import annotations

import math
import re
import reprlib

from .functions import is_number
from .jsregex import RegexError, compile_js
from .extensions import PASS_FAIL_KEYS
from .ids import normalize_tags
from .limits import Limits
from .collections import is_collection, resolve_models
from .model_ids import normalize_model_entry
from .schema import (
    RENDER_AS_VALUES,
    Author,
    Blueprint,
    CoverageConfig,
    CustomModel,
    Judge,
    Reference,
    construct,
)
from .notes import Notes, choice_hint, short, type_name
from .extensions import Extensions
from .point_reader import PointReader


HEADER_KEYS = frozenset(
    {"id", "configId", "title", "configTitle", "description", "author", "reference", "references",
     "citation", "citations", "tags", "models", "system", "systemPrompt", "systems", "temperature",
     "temperatures", "point_defs", "defs", "render_as", "noCache", "evaluationConfig", "embeddingModel",
     "tools", "toolUse", "context", "externalServices", "concurrency", "fixtures", "prompts"}
) | frozenset(PASS_FAIL_KEYS)

JUDGE_APPROACHES = ("standard", "prompt-aware", "holistic")
HTTP_METHODS = ("GET", "POST", "PUT")
CUSTOM_MODEL_FIELDS = frozenset(
    {"id", "url", "modelName", "inherit", "format", "promptFormat", "headers", "parameters", "parameterMapping"}
)
INHERITABLE = ("openai", "anthropic", "google", "mistral", "together", "xai", "openrouter")
# The longest model id in the corpus has 37 characters; ids are names, not text. Longer entries
# are refused where they stand, so the checks on a model id (and the pages listing it) stay cheap
# however often an alias repeats it.
MAX_MODEL_ID_CHARS = 200
TOOL_MODES = ("trace-only", "native", "auto")
TOOL_KEYS = ("name", "description", "schema", "mocks", "default")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TOOL_STEPS = 50  # runs/engine/tools.MAX_STEPS: a blueprint cannot ask for an unbounded loop


class HeaderReader:
    """The blueprint header: title, models, systems, temperatures, judges, tools, point definitions.

    What prompts inherit from it (systems, render_as, noCache, pass/fail keys) stays on the reader
    for the prompt reader to read.
    """

    def __init__(self, notes: Notes, ext: Extensions, points: PointReader, *, derived_id, collections,
                 limits: Limits):
        self.notes, self.ext, self.points = notes, ext, points
        self.error, self.warn = notes.error, notes.warn
        self.derived_id = derived_id
        self.collections = collections
        self.limits = limits
        self.systems: list | None = None
        self.render_as: str | None = None
        self.no_cache: bool | None = None
        self.pass_fail: dict | None = None
        self.mapping: dict | None = None  # the header as written (a prompt's warning about a header key points here)

    def read_header(self, h: dict) -> Blueprint:
        bp = construct(Blueprint, derived_id=self.derived_id)  # not validated: its validator is costly to build
        self.notes.unknown_keys(h, HEADER_KEYS | {"prompts"}, (), "the blueprint header")

        for key in ("id", "configId"):
            if key in h:
                bp.id = self.notes.expect_text(h, key, (key,))
                self.warn(f"`{key}` is deprecated and ignored: a blueprint's id comes from its file path"
                          + (f" (here `{self.derived_id}`)" if self.derived_id else ""),
                          h, key, (key,), f"remove `{key}`", "deprecated", at_key=True)
                break
        for key in ("title", "configTitle"):
            if key in h:
                bp.title = self.notes.expect_text(h, key, (key,))
                break
        if "description" in h:
            bp.description = self.notes.expect_text(h, "description", ("description",))
        if "author" in h:
            bp.author = self.read_author(h)
        bp.references = self.read_references(h)
        if "tags" in h:
            tags = h["tags"]
            if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
                bp.tags = normalize_tags(tags)
            elif tags is not None:
                self.error("Config file has an invalid 'tags' field (must be an array of strings if provided).",
                           h, "tags", ("tags",), "write tags as a list: `tags: [safety, legal]`", "type")
        self.read_system(h, bp)
        self.read_temperatures(h, bp)
        self.read_models(h, bp)
        defs_key = "point_defs" if "point_defs" in h else ("defs" if "defs" in h else None)
        if defs_key:
            self.points.read_defs(h, defs_key, bp)
        if "render_as" in h:
            value = h["render_as"]
            if value in RENDER_AS_VALUES:
                bp.render_as = value
                self.render_as = value
            else:
                self.error("Invalid global 'render_as' value. Must be one of: markdown, html, plaintext.",
                           h, "render_as", ("render_as",), choice_hint(value, RENDER_AS_VALUES), "enum")
        if "noCache" in h:
            bp.no_cache = self.notes.expect_bool(h, "noCache", ("noCache",))
            self.no_cache = bp.no_cache
        if "evaluationConfig" in h:
            self.read_evaluation_config(h, bp)
        if "embeddingModel" in h:
            bp.embedding_model = self.notes.expect_text(h, "embeddingModel", ("embeddingModel",))
        self.read_tools(h, bp)
        self.check_tool_mocks(bp, h)
        if "context" in h and h["context"] is not None:
            if isinstance(h["context"], dict):
                bp.context = h["context"]
            else:
                self.error(f"`context` must be a mapping, not {type_name(h['context'])}", h, "context",
                           ("context",), code="type")
        if "externalServices" in h:
            self.read_external_services(h, bp)
        if "concurrency" in h:
            value = h["concurrency"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
                bp.concurrency = value
            else:
                self.error(f"`concurrency` must be a whole number of at least 1, not {short(value)}", h,
                           "concurrency", ("concurrency",), code="type")
        if "fixtures" in h and h["fixtures"] is not None:
            if isinstance(h["fixtures"], (dict, str)):
                bp.fixtures = h["fixtures"]
            else:
                self.error("`fixtures` must be a mapping of canned responses or the name of a fixtures file",
                           h, "fixtures", ("fixtures",), code="type")
        self.mapping = h
        self.pass_fail = self.ext.read_pass_fail(h, ())
        for key, value in self.pass_fail.items():
            setattr(bp, key, value)
        return bp

    def read_author(self, h):
        value = h["author"]
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            if isinstance(value.get("name"), str) and value["name"].strip():
                self.notes.unknown_keys(value, ("name", "url", "image_url"), ("author",), "`author`")
                links = {}
                for field_name in ("url", "image_url"):
                    link = value.get(field_name)
                    if link is None or isinstance(link, str):
                        links[field_name] = link
                    else:
                        self.error(f"`author.{field_name}` must be text (a web address), not {type_name(link)}",
                                   value, field_name, ("author", field_name), "write it as `https://...`", "author")
                return Author(name=value["name"], **links)
            self.error("Invalid 'author' object: missing 'name' string.", h, "author", ("author",),
                       "add `name: Your Name` under `author`", "author")
            return None
        self.error("Invalid 'author' field: must be a string or an object with 'name'.", h, "author",
                   ("author",), code="author")
        return None

    def read_references(self, h) -> list[Reference] | None:
        present = [k for k in ("reference", "citation", "references", "citations") if h.get(k)]
        if not present:
            return None
        key = present[0]
        if len(present) > 1:
            self.warn(f"`{key}` and `{present[1]}` both given; only `{key}` is used", h, present[1],
                      (present[1],), "merge them into one `references` list", "alias-conflict", at_key=True)
        raw = h[key]
        items = raw if isinstance(raw, list) else [raw]
        container = raw if isinstance(raw, list) else h
        out: list[Reference] = []
        for index, item in enumerate(items):
            ikey = index if isinstance(raw, list) else key
            path = (key, index) if isinstance(raw, list) else (key,)
            if isinstance(item, str):
                out.append(Reference(title=item))
            elif isinstance(item, dict):
                title = item.get("title") or item.get("name")
                if isinstance(title, str) and title:
                    url = item.get("url")
                    out.append(Reference(title=title, url=url if isinstance(url, str) else None))
                else:
                    self.error("Invalid 'reference'/'citation' object: missing 'title' or 'name' string.",
                               container, ikey, path, "give each reference a `title`", "reference")
            else:
                self.error("Invalid 'reference'/'citation' object: missing 'title' or 'name' string.",
                           container, ikey, path, "a reference is text or a mapping with `title` and `url`",
                           "reference")
        return out

    def read_system(self, h, bp):
        system = h.get("system")
        systems_key = "systems" if h.get("systems") is not None else None
        if isinstance(system, list):
            if systems_key:
                self.error("both `system` (as a list) and `systems` are given", h, "system", ("system",),
                           "keep only `systems`", "systems")
            else:
                systems_key = "system"  # a list under `system` means `systems`, as upstream
            system = None
        elif system is not None and not isinstance(system, str):
            self.error(f"`system` must be text, not {type_name(system)}", h, "system", ("system",), code="type")
            system = None
        if not system and isinstance(h.get("systemPrompt"), str):
            system = h["systemPrompt"]
        bp.system = system or None
        if systems_key is None:
            return
        systems = h[systems_key]
        if not isinstance(systems, list) or not all(s is None or isinstance(s, str) for s in systems):
            self.error("Config file has invalid 'systems' (must be an array of strings or nulls).", h, systems_key,
                       (systems_key,), code="systems")
        elif sum(s is None for s in systems) > 1:
            self.error("'systems' can contain at most one 'null' entry.", h, systems_key, (systems_key,),
                       "use one `null` for the variant with no system prompt", "systems")
        else:
            bp.systems = systems
            self.systems = systems

    def read_temperatures(self, h, bp):
        if "temperature" in h and h["temperature"] is not None:
            if is_number(h["temperature"]) and math.isfinite(h["temperature"]):
                bp.temperature = float(h["temperature"])
            else:
                self.error("Config file has invalid 'temperature' (must be a number).", h, "temperature",
                           ("temperature",), "write a number from 0 to 2; .inf and .nan are not temperatures", "type")
        if "temperatures" in h and h["temperatures"] is not None:
            temps = h["temperatures"]
            if isinstance(temps, list) and all(is_number(t) and math.isfinite(t) for t in temps):
                bp.temperatures = [float(t) for t in temps]
                if bp.temperature is not None and temps:
                    self.warn("`temperature` is ignored because `temperatures` is set", h, "temperature",
                              ("temperature",), "remove one of them", "temperature", at_key=True)
            else:
                self.error("Config file has invalid 'temperatures' (must be an array of numbers).", h,
                           "temperatures", ("temperatures",), "write e.g. `temperatures: [0, 0.7]`", "type")
        for key in ("temperature", "temperatures"):
            values = [bp.temperature] if key == "temperature" else (bp.temperatures or [])
            for t in values:
                if t is not None and not 0 <= t <= 2:
                    self.warn(f"temperature {t:g} is outside 0 to 2, which most providers reject", h, key,
                              (key,), code="temperature")

    def read_models(self, h, bp):
        if "models" not in h or h["models"] is None:
            return
        raw = h["models"]
        if not isinstance(raw, list):
            self.error("The 'models' field must be an array of strings or custom model objects.", h, "models",
                       ("models",), "write each model as a list item: `- openai:gpt-4o-mini`", "models")
            return
        bp.models_given = True
        seen: set[str] = set()
        for index, entry in enumerate(raw):
            path = ("models", index)
            if isinstance(entry, str) and len(entry) > MAX_MODEL_ID_CHARS and len(entry.strip()) > MAX_MODEL_ID_CHARS:
                self.error(f"this model id is {len(entry.strip()):,} characters long; a model id has at most "
                           f"{MAX_MODEL_ID_CHARS}", raw, index, path,
                           "write the model as `provider:model`, e.g. `openai:gpt-4o-mini`", "model")
                continue
            value, warning = _normalize_model_entry(entry)
            if warning:
                self.warn(warning, raw, index, path, code="model")
            if value is None:
                continue
            if isinstance(value, dict):
                model = self.read_custom_model(value, raw, index, path)
                if model is None:
                    continue
                key = model.id
            else:
                model = key = value
                if ":" not in value and not is_collection(value):
                    self.warn(f"model '{value}' has no provider prefix", raw, index, path,
                              "write models as `provider:model`, e.g. `openai:gpt-4o-mini`", "model")
            if key in seen:
                self.warn(f"model '{key}' is listed twice; it will run once", raw, index, path, code="model")
                continue
            seen.add(key)
            bp.models.append(model)

    def read_custom_model(self, entry: dict, container, key, path) -> CustomModel | None:
        ok = True
        for required in ("id", "url", "modelName", "inherit"):
            if not isinstance(entry.get(required), str) or not entry[required].strip():
                self.error(f"Invalid custom model definition: '{required}' is required and must be a string.",
                           container, key, path, code="custom-model")
                ok = False
        if isinstance(entry.get("id"), str) and len(entry["id"]) > MAX_MODEL_ID_CHARS:
            self.error(f"Invalid custom model definition: 'id' is {len(entry['id']):,} characters long; a model id "
                       f"has at most {MAX_MODEL_ID_CHARS}", entry, "id", (*path, "id"),
                       "give the model a short name such as `custom:my-model`", "custom-model")
            ok = False
        if entry.get("format") is not None and entry["format"] not in ("chat", "completions"):
            self.error("Invalid custom model definition: 'format' must be either 'chat' or 'completions'",
                       entry, "format", (*path, "format"), code="custom-model")
            ok = False
        if entry.get("promptFormat") is not None and entry["promptFormat"] not in ("conversational", "raw"):
            self.error("Invalid custom model definition: 'promptFormat' must be either 'conversational' or 'raw'",
                       entry, "promptFormat", (*path, "promptFormat"), code="custom-model")
            ok = False
        if isinstance(entry.get("inherit"), str) and entry["inherit"] not in INHERITABLE:
            self.error(f"Invalid custom model definition: 'inherit' must be one of {', '.join(INHERITABLE)}",
                       entry, "inherit", (*path, "inherit"), choice_hint(entry["inherit"], INHERITABLE),
                       "custom-model")
            ok = False
        for mapping_key in ("headers", "parameters", "parameterMapping"):
            value = entry.get(mapping_key)
            if value is not None and not isinstance(value, dict):
                self.error(f"Invalid custom model definition: '{mapping_key}' must be a mapping", entry,
                           mapping_key, (*path, mapping_key), code="custom-model")
                ok = False
        for mapping_key in ("headers", "parameterMapping"):
            value = entry.get(mapping_key)
            if isinstance(value, dict):
                for k, v in value.items():
                    if not isinstance(v, str):
                        self.error(f"Invalid custom model definition: '{mapping_key}.{k}' must be text", value, k,
                                   (*path, mapping_key, k), "quote the value", "custom-model")
                        ok = False
        parameters = entry.get("parameters")
        if isinstance(parameters, dict):
            for k, v in parameters.items():
                if is_number(v) and not math.isfinite(v):
                    self.error(f"Invalid custom model definition: 'parameters.{k}' must be a finite number",
                               parameters, k, (*path, "parameters", k), "write a number such as 1024", "custom-model")
                    ok = False
        if isinstance(entry.get("url"), str) and not re.match(r"^https?://[^\s/]+", entry["url"]):
            self.error("Invalid custom model definition: 'url' must be an http:// or https:// address", entry,
                       "url", (*path, "url"), code="custom-model")
            ok = False
        if not ok:
            return None
        extra = {k: v for k, v in entry.items() if k not in CUSTOM_MODEL_FIELDS}
        return CustomModel(
            id=entry["id"], url=entry["url"], modelName=entry["modelName"], inherit=entry["inherit"],
            format=entry.get("format"), promptFormat=entry.get("promptFormat"), headers=entry.get("headers"),
            parameters=entry.get("parameters"), parameterMapping=entry.get("parameterMapping"), extra=extra,
        )

    def read_evaluation_config(self, h, bp):
        config = h["evaluationConfig"]
        if config is None:
            return
        if not isinstance(config, dict):
            self.error("`evaluationConfig` must be a mapping", h, "evaluationConfig", ("evaluationConfig",),
                       code="type")
            return
        bp.evaluation_config = config
        for legacy in ("judgeModels", "judgeMode"):
            if legacy in config:
                self.warn(f"`{legacy}` is deprecated and has no effect", config, legacy, ("evaluationConfig", legacy),
                          "list judges under `llm-coverage: judges:` with `model` and `approach`", "deprecated",
                          at_key=True)
        self.notes.unknown_keys(config, ("llm-coverage", "embedding", "judgeModels", "judgeMode"), ("evaluationConfig",),
                          "`evaluationConfig`")
        coverage = config.get("llm-coverage")
        if coverage is None:
            return
        path = ("evaluationConfig", "llm-coverage")
        if not isinstance(coverage, dict):
            self.error("`llm-coverage` must be a mapping", config, "llm-coverage", path, code="type")
            return
        self.notes.unknown_keys(coverage, ("judges", "useExperimentalScale", "judgeModels", "judgeMode"), path,
                          "`llm-coverage`")
        for legacy in ("judgeModels", "judgeMode"):
            if legacy in coverage:
                self.warn(f"`{legacy}` is deprecated and has no effect", coverage, legacy, (*path, legacy),
                          "list judges under `judges:` with `model` and `approach`", "deprecated", at_key=True)
        result = CoverageConfig()
        if "useExperimentalScale" in coverage:
            result.use_experimental_scale = bool(
                self.notes.expect_bool(coverage, "useExperimentalScale", (*path, "useExperimentalScale")))
        judges = coverage.get("judges")
        if judges is not None:
            if not isinstance(judges, list):
                self.error("`judges` must be a list", coverage, "judges", (*path, "judges"), code="type")
            else:
                result.judges = []
                for index, judge in enumerate(judges):
                    jpath = (*path, "judges", index)
                    if isinstance(judge, str):
                        judge = {"model": judge}
                    if not isinstance(judge, dict) or not isinstance(judge.get("model"), str):
                        self.error("each judge needs a `model` (`provider:model`)", judges, index, jpath,
                                   "write `- model: openai:gpt-4o-mini` with `approach: holistic`", "judge")
                        continue
                    self.notes.unknown_keys(judge, ("id", "model", "approach"), jpath, "a judge")
                    judge_id = judge.get("id")
                    if is_number(judge_id):
                        judge_id = str(judge_id)
                    elif judge_id is not None and not isinstance(judge_id, str):
                        self.error(f"a judge's `id` must be text, not {type_name(judge_id)}", judge, "id",
                                   (*jpath, "id"), "write a short name such as `id: strict`, or leave `id` out",
                                   "judge")
                        continue
                    approach = judge.get("approach", "holistic")
                    if approach not in JUDGE_APPROACHES:
                        self.error(f"judge approach must be one of {', '.join(JUDGE_APPROACHES)}", judge, "approach",
                                   (*jpath, "approach"), choice_hint(approach, JUDGE_APPROACHES), "judge")
                        continue
                    result.judges.append(Judge(id=judge_id, model=judge["model"], approach=approach))
        bp.coverage = result

    def read_tools(self, h, bp):
        """`tools` (each a name, a description, a JSON Schema, and our `mocks`/`default`) and `toolUse`.

        Mocks answer native tool calls (runs/engine/tools.py, docs/blueprints.md "Tools and mocks"); each
        problem is an error at its place."""
        tools = None
        if "tools" in h and h["tools"] is not None:
            tools = h["tools"]
            if not isinstance(tools, list):
                self.error("`tools` must be a list of tools, each with a `name`", h, "tools", ("tools",),
                           "write `- name: search` with an optional `description` and `schema`", "tools")
                tools = None
            else:
                ok = True
                seen: set[str] = set()
                use = h.get("toolUse") if isinstance(h.get("toolUse"), dict) else {}
                sent = use.get("mode") in ("native", "auto") and use.get("enabled") is not False
                for index, tool in enumerate(tools):
                    ok = self.read_tool(tools, index, seen, sent) and ok
                if ok:
                    bp.tools = tools
        if "toolUse" in h and h["toolUse"] is not None:
            use = h["toolUse"]
            if not isinstance(use, dict):
                self.error("`toolUse` must be a mapping", h, "toolUse", ("toolUse",), code="tools")
                return
            self.notes.unknown_keys(use, ("enabled", "mode", "maxSteps", "outputFormat"), ("toolUse",), "`toolUse`")
            mode = use.get("mode")
            if mode is not None and mode not in TOOL_MODES:
                self.error(f"`toolUse.mode` must be one of {', '.join(TOOL_MODES)}, not {short(mode)}", use, "mode",
                           ("toolUse", "mode"), choice_hint(mode, TOOL_MODES), "tools")
            elif mode in ("native", "auto") and not tools and use.get("enabled") is not False:
                self.warn(f"`toolUse.mode: {mode}` without `tools`: there is nothing to send, so tool use is "
                          "scored from the `TOOL_CALL` lines in the response (trace-only)", use, "mode",
                          ("toolUse", "mode"), "declare the tools under `tools:` with their `mocks`", "tools")
            if "enabled" in use and not isinstance(use["enabled"], bool):
                self.error("`toolUse.enabled` must be true or false", use, "enabled", ("toolUse", "enabled"),
                           code="tools")
            if use.get("outputFormat") not in (None, "json-line"):
                self.error("`toolUse.outputFormat` must be 'json-line'", use, "outputFormat",
                           ("toolUse", "outputFormat"), code="tools")
            steps = use.get("maxSteps")
            if steps is not None and not (is_number(steps) and float(steps).is_integer() and 1 <= steps <= MAX_TOOL_STEPS):
                self.error(f"`toolUse.maxSteps` must be a whole number from 1 to {MAX_TOOL_STEPS} (model calls in "
                           f"one turn's tool loop), not {short(steps)}", use, "maxSteps", ("toolUse", "maxSteps"),
                           "write e.g. `maxSteps: 4`", "tools")
            bp.tool_use = use

    def read_tool(self, tools: list, index: int, seen: set[str], sent: bool) -> bool:
        """One entry of `tools`; False when it cannot be used. ``sent``: the tools go to providers (native or
        auto), so their names must be ones the providers take."""
        tool = tools[index]
        path = ("tools", index)
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"].strip():
            self.error("each entry of `tools` must be a mapping with a text `name`", tools, index, path,
                       "write `- name: search` with an optional `description`, `schema` and `mocks`", "tools")
            return False
        name = tool["name"]
        self.notes.unknown_keys(tool, TOOL_KEYS, path, f"tool `{name}`")
        ok = True
        if sent and not TOOL_NAME.fullmatch(name):
            self.error(f"tool name {short(name)} cannot be sent to providers: use letters, digits, `_` and `-` "
                       "(at most 64)", tool, "name", (*path, "name"), "for example `name: search_docs`", "tools")
            ok = False
        elif name in seen:
            self.error(f"tool `{name}` is declared twice", tool, "name", (*path, "name"),
                       "give each tool its own name", "tools")
            ok = False
        seen.add(name)
        if "description" in tool and tool["description"] is not None and not isinstance(tool["description"], str):
            self.error(f"tool `{name}`: `description` must be text", tool, "description", (*path, "description"),
                       code="tools")
            ok = False
        if "schema" in tool and tool["schema"] is not None:
            problem = tool_schema_error(tool["schema"])
            if problem:  # an error when the schema is sent and checks arguments; trace-only, a warning
                (self.error if sent else self.warn)(
                    f"tool `{name}`: {problem}", tool, "schema", (*path, "schema"),
                    "write a JSON Schema such as `{type: object, properties: {query: {type: string}}, "
                    "required: [query]}`", "tools")
                ok = ok and not sent
        if "mocks" in tool and tool["mocks"] is not None:
            mocks = tool["mocks"]
            if not isinstance(mocks, list):
                self.error(f"tool `{name}`: `mocks` must be a list of rules", tool, "mocks", (*path, "mocks"),
                           "write `mocks: [{when: {query: x}, result: {...}}]`", "tools")
                ok = False
            else:
                for m_index, mock in enumerate(mocks):
                    ok = self.read_mock(name, mocks, m_index, (*path, "mocks", m_index)) and ok
        if "default" in tool and isinstance(tool["default"], dict) and ({"result", "error"} & set(tool["default"])):
            ok = self.read_answer(name, tool["default"], (*path, "default"), "default") and ok
        return ok

    def read_mock(self, name: str, mocks: list, index: int, path: tuple) -> bool:
        mock = mocks[index]
        what = f"tool `{name}`, mock {index + 1}"
        if not isinstance(mock, dict):
            self.error(f"{what} must be a mapping with `when` and a `result` or an `error`", mocks, index, path,
                       "write `- {when: {query: x}, result: {...}}`", "tools")
            return False
        self.notes.unknown_keys(mock, ("when", "result", "error"), path, what)
        ok = self.read_answer(name, mock, path, f"mock {index + 1}")
        when = mock.get("when")
        if when is None:
            return ok
        if not isinstance(when, dict):
            self.error(f"{what}: `when` must map argument names to values (or `{{matches: regex}}`)", mock, "when",
                       (*path, "when"), "write `when: {query: Article 2}` or `when: {query: {matches: '^Art'}}`",
                       "tools")
            return False
        for arg, wanted in when.items():
            if isinstance(wanted, dict) and "matches" in wanted:
                pattern = wanted["matches"]
                problem = None
                if set(wanted) != {"matches"} or not isinstance(pattern, str):
                    problem = "`matches` takes one regex, as text, alone in its mapping"
                else:
                    try:
                        compile_js(pattern)
                    except RegexError as exc:
                        problem = f"the regex cannot be used: {exc}"
                if problem:
                    self.error(f"{what}, `when.{arg}`: {problem}", when, arg, (*path, "when", arg),
                               "write `{matches: '^Article'}`", "tools")
                    ok = False
        return ok

    def read_answer(self, name: str, mapping: dict, path: tuple, what: str) -> bool:
        has_result, has_error = "result" in mapping, "error" in mapping
        if has_result == has_error:
            self.error(f"tool `{name}`, {what}: give exactly one of `result` (what the tool returns) and `error` "
                       "(a tool error the model sees)", mapping, None, path,
                       "write `result: {...}` or `error: not found`", "tools")
            return False
        if has_error and not isinstance(mapping["error"], str):
            self.error(f"tool `{name}`, {what}: `error` must be text", mapping, "error", (*path, "error"),
                       code="tools")
            return False
        return True

    def check_tool_mocks(self, bp: Blueprint, header: dict) -> None:
        """A warning for each tool a native or auto loop could call but no mock can answer."""
        use = bp.tool_use if isinstance(bp.tool_use, dict) else {}
        if use.get("mode") not in ("native", "auto") or use.get("enabled") is False or not bp.tools:
            return
        for index, tool in enumerate(bp.tools):
            if not tool.get("mocks") and "default" not in tool:
                self.warn(f"tool `{tool['name']}` has no `mocks` and no `default`: in a native tool loop a call "
                          "to it cannot be answered, and the response fails with that reason",
                          header["tools"][index] if isinstance(header.get("tools"), list) else None, "name",
                          ("tools", index, "name"), "add `mocks: [{when: {...}, result: ...}]` or `default: "
                          "{result: ...}` (docs/blueprints.md, \"Tools and mocks\")", "tools")

    def read_external_services(self, h, bp):
        services = h["externalServices"]
        if services is None:
            return
        if not isinstance(services, dict):
            self.error("`externalServices` must be a mapping of service names to settings", h, "externalServices",
                       ("externalServices",), code="type")
            return
        for name, svc in services.items():
            path = ("externalServices", name)
            if not isinstance(svc, dict) or "url" not in svc:
                self.error(f"External service '{name}' must have a 'url' field", services, name, path,
                           code="external-service")
                continue
            if not isinstance(svc["url"], str) or not re.match(r"^https?://[^\s/]+", svc["url"]):
                self.error(f"External service '{name}' has invalid URL", svc, "url", (*path, "url"),
                           code="external-service")
            if "method" in svc and svc["method"] not in HTTP_METHODS:
                self.error(f"External service '{name}' has invalid method (use GET, POST or PUT)", svc, "method",
                           (*path, "method"), code="external-service")
            if "timeout_ms" in svc and not (is_number(svc["timeout_ms"]) and svc["timeout_ms"] > 0):
                self.error(f"External service '{name}' has invalid timeout_ms (must be a positive number)", svc,
                           "timeout_ms", (*path, "timeout_ms"), code="external-service")
        bp.external_services = services

    def check_variants(self, bp: Blueprint, header: dict):
        """models x temperatures x system prompts past ``Limits.max_variants`` is an error at `models`."""
        models, _ = resolve_models(bp.models if bp.models_given else [], self.collections)
        counts = (max(len(models), 1), len(bp.temperatures) if bp.temperatures else 1,
                  len(bp.systems) if bp.systems else 1)
        total = counts[0] * counts[1] * counts[2]
        limit = self.limits.max_variants
        if total <= limit:
            return
        at = "models" if isinstance(header, dict) and "models" in header else None
        self.error(f"this blueprint asks for {counts[0]:,} model{'s' if counts[0] != 1 else ''} x {counts[1]:,} "
                   f"temperature{'s' if counts[1] != 1 else ''} x {counts[2]:,} system prompt"
                   f"{'s' if counts[2] != 1 else ''} = {total:,} model variants, more than the limit of {limit:,}",
                   header if at else None, at, ("models",),
                   "list fewer models, temperatures or system prompts (or split the blueprint), or raise the limit "
                   "with the setting EVALSITE_MAX_VARIANTS", "limit", at_key=bool(at))

    def check_collections(self, bp: Blueprint, header: dict):
        check_collections(self.notes, bp, header, self.collections)


def check_collections(notes: Notes, bp: Blueprint, header: dict, collections) -> None:
    """A warning for each collection the blueprint's models name (or CORE, with none) that ``collections``
    does not know: a run would need it resolved."""
    names = [m for m in bp.models if is_collection(m)]
    if not bp.models_given:
        names = ["CORE"]
    for name in names:
        if collections is not None and collections(name) is not None:
            continue
        models = header.get("models") if isinstance(header.get("models"), list) else None
        if models is not None and name in models:
            container, key, path = models, models.index(name), ("models", models.index(name))
        else:
            container, key, path = None, None, ("models",)
        lead = (f"model collection '{name}' was not found" if bp.models_given else
                "no `models` listed, so a run would use the collection 'CORE', which was not found")
        notes.warn(lead + "; a run needs it resolved", container, key, path,
                  f"add `models/{name}.json` (a JSON list of model ids) beside the blueprint or in a parent "
                  "folder, import it into evalsite, or list models explicitly", "collection")


def tool_schema_error(schema) -> str | None:
    """Why ``schema`` is not a JSON Schema (2020-12) a tool can take, or None. A tool takes named arguments,
    so the schema describes an object."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        return f"`schema` must be a mapping (a JSON Schema), not {type_name(schema)}"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"`schema` is not a valid JSON Schema{' at ' + where if where else ''}: {exc.message[:200]}"
    except RecursionError:
        return "`schema` is nested too deeply"
    if schema.get("type", "object") != "object":
        return "`schema` must describe an object (`type: object`): a tool takes named arguments"
    return None


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 80


def _normalize_model_entry(entry):
    """``model_ids.normalize_model_entry``, in time linear in the entry's length.

    Its text branch removes spaces around the first ``:`` with the regex ``\\s*:\\s*``, which
    retries from every space of a run of spaces that does not end at a colon: quadratic, 16 s
    for 1,000 aliases of a 3,000-space id. The same result: everything before the first colon
    without trailing spaces, the colon, everything after it without leading spaces.
    tests/spec/test_hostile_round2.py checks the two agree.
    """
    if not isinstance(entry, str):
        return normalize_model_entry(entry)
    text = entry.strip()
    if not text:
        return None, "Skipped an empty model entry."
    head, colon, tail = text.partition(":")
    fixed = f"{head.rstrip()}:{tail.lstrip()}" if colon else text
    if fixed != text:
        return fixed, f"Model entry {_BRIEF.repr(text)} was read as {_BRIEF.repr(fixed)} (spaces around ':' removed)."
    return text, None
