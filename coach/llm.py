"""The language model gateway: the only module that imports the openai SDK.

Callers get our own frozen dataclasses and our own LLMError, never SDK objects, so the
provider can change (OPENAI_BASE_URL: OpenAI, Ollama, vLLM, the offline coach) without
the rest of the code knowing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import openai
from django.conf import settings


class LLMError(Exception):
    """The model could not answer. `retryable` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Embedding:
    vector: list[float]
    model: str


def embed(texts: list[str]) -> list[Embedding]:
    """One embedding per text, in order, from EMBEDDING_MODEL."""
    if not texts:
        return []
    model = settings.EMBEDDING_MODEL
    try:
        response = _client().embeddings.create(model=model, input=texts)
    except openai.OpenAIError as error:
        raise as_llm_error(error) from error
    vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    if len(vectors) != len(texts):
        raise LLMError(f"asked for {len(texts)} embeddings, got {len(vectors)}", retryable=True)
    return [Embedding(vector=list(vector), model=model) for vector in vectors]


def as_llm_error(error: openai.OpenAIError) -> LLMError:
    """Our error for an SDK error: timeouts, rate limits, outages and 5xx may pass."""
    if isinstance(error, openai.APITimeoutError):
        return LLMError("the model did not answer in time", retryable=True)
    if isinstance(error, openai.APIConnectionError):
        return LLMError("the model could not be reached", retryable=True)
    if isinstance(error, openai.RateLimitError):
        return LLMError("the model is rate-limited", retryable=True)
    if isinstance(error, openai.APIStatusError):
        return LLMError(
            f"the model answered {error.status_code}: {error.message}",
            retryable=error.status_code >= 500 or error.status_code in (408, 409),
        )
    return LLMError(f"the model failed: {error}", retryable=False)


def _client() -> openai.OpenAI:
    return _client_for(
        settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY, settings.LLM_TIMEOUT_SECONDS, settings.LLM_MAX_RETRIES
    )


@lru_cache(maxsize=4)
def _client_for(base_url: str | None, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    # Explicit timeout and retries: the SDK's defaults (600 s, 2 retries) would hold a
    # chat turn for ten minutes before telling the user anything.
    return openai.OpenAI(
        base_url=base_url, api_key=api_key or "offline-coach-needs-no-key", timeout=timeout, max_retries=max_retries
    )
