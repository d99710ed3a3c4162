from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server  # noqa: F401

# --------------------------------------------------------------------------
# Judging and assessing (issue 5): a scripted, in-process CompleteFn.

import re  # noqa: E402
from typing import Callable  # noqa: E402

from runs.engine.types import ChatRequest, ChatResult, Usage  # noqa: E402

Answer = str | ChatResult | Callable[[ChatRequest], "str | ChatResult"]


def criterion_of(request: ChatRequest) -> str:
    """The criterion a judge request asks about (the one in the user's turn, not the examples)."""
    user = request.messages[-1]["content"]
    match = re.search(r"<CRITERION>\n(.*?)\n</CRITERION>", user, re.S)
    assert match, "not a judge request"
    return match.group(1)


class ScriptedModels:
    """An async CompleteFn whose answers are scripted per model id.

    A model's script is one answer for every call, or a list taken in order
    (the last repeats), where an answer is text, a ChatResult, or a function
    of the request. A model without a script fails as one without a key.
    Every request is recorded in ``requests``.
    """

    def __init__(self, script: dict[str, Answer | list[Answer]]):
        self.script = script
        self.requests: list[ChatRequest] = []
        self._served: dict[str, int] = {}

    async def __call__(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        if request.model_id not in self.script:
            return ChatResult(error=f"no API key is configured for {request.model_id}", retryable=False)
        answers = self.script[request.model_id]
        if isinstance(answers, list):
            index = self._served.get(request.model_id, 0)
            self._served[request.model_id] = index + 1
            answer = answers[min(index, len(answers) - 1)]
        else:
            answer = answers
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, ChatResult):
            return answer
        return ChatResult(text=answer, usage=Usage(input_tokens=100, output_tokens=20), latency_ms=5.0,
                          cost_usd=0.001)

    def calls_to(self, model_id: str) -> list[ChatRequest]:
        return [r for r in self.requests if r.model_id == model_id]


def verdict(label: str, reflection: str = "Judged.") -> str:
    return f"<reflection>{reflection}</reflection>\n<classification>{label}</classification>"
