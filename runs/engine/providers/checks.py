"""Before a run: can every model be called? (No network; a pure function of models and environment.)"""

from __future__ import annotations

from typing import Iterable, Mapping

from blueprints.spec.model_ids import IDEAL_MODEL_ID, LEGACY_IDEAL_MODEL_ID, parse_for_api_call, provider_of
from blueprints.spec.schema import CustomModel

from .endpoints import FIXTURES_PREFIX, Problem, resolve_endpoint
from .fixtures import Fixtures
from .settings import ProviderSettings, settings_from_env


def check_models(
    models: Iterable[str | CustomModel],
    env: Mapping[str, str] | ProviderSettings,
    *,
    custom_models: Mapping[str, CustomModel] | None = None,
    fixtures: Fixtures | None = None,
) -> list[Problem]:
    """One :class:`Problem` per model that cannot be called, in the order given.

    ``models`` are ids or custom model objects (a blueprint's ``models``, with
    collections already resolved). ``env`` is ``os.environ`` (or settings
    built from it). Problems name the environment variable to set, or the
    name to add to ``EVALSITE_BLUEPRINT_ENV``; they never contain a value.
    The router reports the same problem for each item of such a model, so a
    run that starts anyway fails those items with the same words.
    """
    settings = env if isinstance(env, ProviderSettings) else settings_from_env(env)
    customs: dict[str, CustomModel] = dict(custom_models or {})
    ids: list[str] = []
    for model in models:
        if isinstance(model, CustomModel):
            customs.setdefault(model.id, model)
            ids.append(model.id)
        else:
            ids.append(parse_for_api_call(model).original_model_id)
    problems: list[Problem] = []
    seen: set[str] = set()
    for model_id in ids:
        if model_id in seen or model_id in (IDEAL_MODEL_ID, LEGACY_IDEAL_MODEL_ID):
            continue
        seen.add(model_id)
        if model_id not in customs and provider_of(model_id) == FIXTURES_PREFIX:
            if fixtures is None:
                problems.append(Problem(model_id, f"model '{model_id}' answers from the blueprint's fixtures, and "
                                                  f"the blueprint has none: add a `fixtures` mapping to its header "
                                                  f"or import a <name>.fixtures.yml beside it"))
            continue
        result = resolve_endpoint(model_id, settings, customs)
        if isinstance(result, Problem):
            problems.append(result)
    return problems


def run_problems(
    models: Iterable[str | CustomModel],
    env: Mapping[str, str] | ProviderSettings,
    *,
    judge_models: Iterable[str] = (),
    embedding_model: str | None = None,
    custom_models: Mapping[str, CustomModel] | None = None,
    fixtures: Fixtures | None = None,
) -> list[str]:
    """What will fail in a run, said before it starts: candidates, judges, the embeddings model.

    The run form shows these under its Start button and a started run keeps them,
    so the same words appear before and after.
    """
    settings = env if isinstance(env, ProviderSettings) else settings_from_env(env)
    problems = [p.message for p in check_models(models, settings, custom_models=custom_models, fixtures=fixtures)]
    problems += [f"judge {p.message}" for p in check_models(list(judge_models), settings, custom_models=custom_models)]
    if embedding_model:
        problems += [f"embeddings {p.message}"
                     for p in check_models([embedding_model], settings, custom_models=custom_models)]
    return problems
