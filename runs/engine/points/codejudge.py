"""Script graders (`$code_judge`): a command from the suite scores a response.

The contract is AgentV's (reference 2.5), written from its description: one JSON
object on standard input (``question``, ``criteria``, ``expected_output``,
``reference_answer``, ``answer``, ``output``, ``input``, ``token_usage``,
``cost_usd``, ``duration_ms``, ``config``), one JSON object on standard output
(``score`` 0..1, optional ``hits``, ``misses``, ``reasoning``).

A script runs code that came with a suite, so it runs only when the operator sets
``EVALSITE_ALLOW_CODE_JUDGES=1``; otherwise the point is not evaluated, with that
reason. When allowed, it runs

* from a copy of the suite's files in a fresh temporary folder (never the
  original folder), which is removed afterwards;
* as an argv list, never through a shell;
* with a small environment (``PATH``, ``LANG``, ``HOME``, ``TMPDIR`` set to the
  temporary folder, and the variables of version managers such as pyenv so that
  ``python`` still resolves): no API key of ours reaches it;
* with a timeout (``timeout_s``, 30 s by default, 600 at most), after which it
  is killed.

Deviation from AgentV, on purpose: a script that exits with an error, times out
or prints something that is not the JSON above is *not evaluated* (with its
stderr's tail), not scored 0: a grader's failure is never a response's fail.
"""

from __future__ import annotations

import json
import posixpath
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .metrics import ResponseMetrics
from .result import PointResult, not_evaluated, scored

ENV_SWITCH = "EVALSITE_ALLOW_CODE_JUDGES"
DEFAULT_TIMEOUT_S = 30.0
MAX_OUTPUT_CHARS = 1_000_000
KEPT_PREFIXES = ("PYENV_", "ASDF_", "NVM_", "BUN_INSTALL")
OFF_REASON = ("script graders are off: they run code that came with the suite, so the operator must allow them "
              f"with {ENV_SWITCH}=1")


def child_env_from(environ: Mapping[str, str]) -> dict[str, str]:
    """What a script grader inherits of ``environ`` (the server's): PATH, HOME and version managers' variables."""
    out = {name: environ[name] for name in ("PATH", "HOME") if environ.get(name)}
    # Version managers' shims (pyenv, asdf, nvm) need their own variables to find the interpreter.
    out.update({k: v for k, v in environ.items() if k.startswith(KEPT_PREFIXES)})
    return out


def _safe_parts(relative: str) -> list[str] | None:
    """The parts of a companion file's path, or None when it would leave the copy (absolute, NUL...)."""
    if not relative or "\0" in relative or relative.startswith("/") or "\\" in relative:
        return None
    return posixpath.normpath(relative).split("/")


def materialize(files: Mapping[str, str], root: Path) -> Path:
    """Write the suite's files under ``root``; returns the folder that stands for the suite's own folder.

    Paths such as ``../shared/x.yaml`` are kept: the suite's folder is placed deep
    enough under ``root`` that every such path still lands inside ``root``.
    """
    parts = {name: _safe_parts(name) for name in files}
    depth = max((sum(1 for p in ps if p == "..") for ps in parts.values() if ps), default=0)
    suite_dir = root.joinpath(*(["suite"] * (depth + 1)))
    suite_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        ps = parts[name]
        if ps is None or not isinstance(text, str):
            continue
        target = (suite_dir / Path(*ps)).resolve()
        if root.resolve() not in target.parents:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return suite_dir


def _stdin_payload(args: dict, response: str, messages: list | None, metrics: ResponseMetrics | None) -> dict:
    conversation = [m for m in (messages or []) if isinstance(m, dict)]
    inputs = [m for m in conversation if m.get("role") in ("system", "user")]
    question = "\n\n".join(str(m.get("content") or "") for m in inputs if m.get("role") == "user")
    usage = None
    if metrics is not None and (metrics.input_tokens is not None or metrics.output_tokens is not None):
        usage = {"input": metrics.input_tokens, "output": metrics.output_tokens}
    return {
        "question": question,
        "criteria": args.get("criteria") or "",
        "expected_output": args.get("expected_output"),
        "reference_answer": args.get("reference_answer") or "",
        "answer": response,
        "output": conversation + [{"role": "assistant", "content": response}],
        "input": inputs,
        "token_usage": usage,
        "cost_usd": metrics.cost_usd if metrics else None,
        "duration_ms": metrics.latency_ms if metrics else None,
        "config": args.get("config"),
    }


def _tail(text: str, limit: int = 2000) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def run_code_judge(args: object, response: str, *, files: Mapping[str, str] | None = None,
                   messages: list | None = None, metrics: ResponseMetrics | None = None,
                   allowed: bool = False, child_env: Mapping[str, str] | None = None) -> PointResult:
    """Run one script grader on one response. Never raises for a script's failure.

    ``allowed`` is the operator's EVALSITE_ALLOW_CODE_JUDGES; ``child_env`` what the script inherits
    (``child_env_from(os.environ)``, built by the caller; the engine reads no environment).
    """
    if not allowed:
        return not_evaluated(OFF_REASON)
    if not isinstance(args, dict) or not isinstance(args.get("command"), list) or not args["command"]:
        return not_evaluated("Invalid arguments for 'code_judge'. Expected {command: [program, arg, ...]}.")
    command = [str(token) for token in args["command"]]
    timeout = float(args.get("timeout_s") or DEFAULT_TIMEOUT_S)
    timeout = min(max(timeout, 0.1), 600.0)
    root = Path(tempfile.mkdtemp(prefix="evalsite-codejudge-"))
    try:
        suite_dir = materialize(files or {}, root)
        cwd_parts = _safe_parts(args.get("cwd") or ".")
        cwd = (suite_dir / Path(*cwd_parts)).resolve() if cwd_parts else None
        if cwd is None or (cwd != root.resolve() and root.resolve() not in cwd.parents):
            return not_evaluated(f"the script's folder '{args.get('cwd')}' is outside the suite")
        cwd.mkdir(parents=True, exist_ok=True)
        program = cwd / command[0]
        if "/" in command[0] and program.is_file():
            program.chmod(program.stat().st_mode | stat.S_IXUSR)
            command[0] = str(program)
        inherited = dict(child_env or {})
        env = {**inherited, "PATH": inherited.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
               "HOME": inherited.get("HOME", str(root)), "TMPDIR": str(root), "EVALSITE_SUITE_DIR": str(suite_dir)}
        payload = json.dumps(_stdin_payload(args, response, messages, metrics), ensure_ascii=False, default=str)
        try:
            done = subprocess.run(command, input=payload, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                                  env=env, shell=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            return not_evaluated(f"the script grader did not finish within {timeout:g} s and was stopped")
        except FileNotFoundError:
            return not_evaluated(f"the script grader's program '{args['command'][0]}' was not found")
        except OSError as exc:
            return not_evaluated(f"the script grader could not start: {exc.strerror or exc}")
        if done.returncode != 0:
            return not_evaluated(f"the script grader exited with status {done.returncode}: "
                                 f"{_tail(done.stderr) or '(no error output)'}")
        return _read_answer(done.stdout[:MAX_OUTPUT_CHARS])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _read_answer(stdout: str) -> PointResult:
    text = stdout.strip()
    start, end = text.find("{"), text.rfind("}")
    try:
        answer = json.loads(text[start:end + 1]) if 0 <= start < end else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return not_evaluated(f"the script grader did not print a JSON object: {_tail(text, 200) or '(nothing)'}")
    score = answer.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
        return not_evaluated(f"the script grader's answer has no numeric `score`: {_tail(text, 200)}")
    parts = []
    if isinstance(answer.get("reasoning"), str) and answer["reasoning"].strip():
        parts.append(answer["reasoning"].strip())
    for key in ("hits", "misses"):
        items = answer.get(key)
        if isinstance(items, list) and items:
            parts.append(f"{key}: " + "; ".join(str(i) for i in items[:4]))
    return scored(min(1.0, max(0.0, float(score))), " ".join(parts) or None)
