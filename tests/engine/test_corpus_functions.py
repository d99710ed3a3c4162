"""Every `$function` the real corpus uses is recognised by the registry.

A plain text scan (not a parse) of shared/corpus/weval-configs, so that even the
file that is not valid YAML is covered: `$name:` keys, `fn:` values, bare
`- $name` list items and `["$name", ...]` tuple heads.
"""

from __future__ import annotations

import re
from pathlib import Path

from blueprints.spec.functions import resolve

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "weval-configs"

PATTERNS = [
    re.compile(r"""(?:^|[\s{,"'-])\$([A-Za-z_]+)["']?\s*:""", re.MULTILINE),  # $name: args
    re.compile(r"""["']?\bfn["']?\s*:\s*["']?(\$?[A-Za-z_]+)"""),  # fn: name
    re.compile(r"""^\s*-\s+["']?\$([A-Za-z_]+)["']?\s*$""", re.MULTILINE),  # - $is_json
    re.compile(r"""\[\s*"\$([A-Za-z_]+)"\s*,"""),  # ["$contains", "x"]
]
NOT_FUNCTIONS = {"ref"}  # `$ref` is expanded by the parser from point_defs


def corpus_function_names() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    files = sorted((CORPUS / "blueprints").rglob("*.yml")) + sorted((CORPUS / "history-json").rglob("*.json"))
    for path in files:
        text = path.read_text(encoding="utf-8")
        for pattern in PATTERNS:
            for name in pattern.findall(text):
                found.setdefault(name, []).append(path.name)
    return found


def test_every_function_name_in_the_corpus_resolves() -> None:
    names = corpus_function_names()
    assert len(names) >= 25, sorted(names)  # the scan finds what is there
    unknown = {name: files[:3] for name, files in names.items() if name.lstrip("$") not in NOT_FUNCTIONS and resolve(name) is None}
    assert unknown == {}


def test_the_scan_sees_aliases_and_dollar_prefixed_fn_values() -> None:
    names = corpus_function_names()
    assert {"match", "imatch", "match_at_least_n_of", "$contains", "$matches", "factcheck"} <= set(names)
