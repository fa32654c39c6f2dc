"""The writer model: any OpenAI-compatible endpoint through the ``openai`` client, with retries
(the client's own: 429, 5xx, connection errors, with back-off), a timeout, and token counts. The
key is a ``SecretStr`` handed to the client only; it is never logged, written or returned. An
endpoint off this machine is refused unless the server allows them (``allow_remote_recipe_models``),
and a redirect is never followed (it could lead the prompts off this machine past that check).

A structured answer is asked for with ``response_format`` json_schema, ``strict`` (the studio's
/v1, llama.cpp's server, vLLM and OpenAI decode it constrained to the schema), and with at least
the tokens the schema's longest answer takes (``answer_size.answer_tokens``) so that it is never
cut mid-JSON. An endpoint that refuses ``response_format`` (400 naming it) is asked again without
it, and from then on: its answers are checked against the schema as they come."""

from __future__ import annotations

import threading
import time
from typing import Any, Optional
from urllib.parse import urlsplit

import openai
from pydantic import SecretStr

from trainer_core.hosts import is_loopback
from trainer_core.recipes.answer_size import answer_tokens
from trainer_core.recipes.errors import MODEL_UNREACHABLE, REMOTE_MODEL, RecipeError
from trainer_core.recipes.schema import WriterModel

NO_KEY = "no-key"  # sent when the recipe names no key: never the OPENAI_API_KEY of this process
BUSY_WAIT_S = (1.0, 10.0)  # first and longest wait after a 429 (a busy server), doubling, within timeout_s


class ModelFailure(Exception):
    """One request failed after its retries (its row is dropped as ``model_error``)."""


class CutShort(Exception):
    """A structured answer ended at ``max_tokens`` before its JSON closed (its row is dropped as
    ``schema``, with the limit named)."""


def shown_endpoint(url: str) -> str:
    """``url`` without user, password, query or fragment (for cards and messages)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def on_this_machine(url: str) -> bool:
    """Whether ``url``'s host is this machine (localhost or a loopback address)."""
    return is_loopback((urlsplit(url).hostname or "").lower())


def check_endpoint(url: str, allow_remote: bool) -> None:
    """Raise RecipeError for a URL that is not http(s), or off this machine while not allowed."""
    try:
        scheme, host = urlsplit(url).scheme, urlsplit(url).hostname
    except ValueError:
        scheme, host = "", None
    if scheme not in ("http", "https") or not host:
        raise RecipeError(f"model.endpoint: '{url[:120]}' is not an http(s) URL", fields=("endpoint",))
    if not allow_remote and not on_this_machine(url):
        raise RecipeError(
            f"model.endpoint: {shown_endpoint(url)} is not on this machine; this server sends recipe prompts only to "
            "127.0.0.1 / localhost / ::1 (its owner can allow others: STUDIO_ALLOW_REMOTE_RECIPE_MODELS)",
            fields=("endpoint",),
            code=REMOTE_MODEL,
        )


class Writer:
    """Chat requests to one model at one endpoint, safe to call from several threads."""

    def __init__(self, model: WriterModel, api_key: Optional[SecretStr], allow_remote: bool) -> None:
        check_endpoint(model.endpoint, allow_remote)
        self.model = model
        self._client = openai.OpenAI(
            base_url=model.endpoint,
            api_key=api_key.get_secret_value() if api_key is not None else NO_KEY,
            max_retries=model.max_retries,
            timeout=model.timeout_s,
            http_client=openai.DefaultHttpxClient(follow_redirects=False),
        )
        self._key = api_key.get_secret_value() if api_key is not None else ""
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self.plain_json = False  # True once the endpoint refused response_format: not asked again

    def ask(self, messages: list[dict[str, str]], schema: Optional[dict[str, Any]] = None, name: str = "value") -> str:
        """The model's answer to ``messages`` (with ``schema``: a JSON answer asked for by
        ``response_format`` json_schema, strict). Raises ModelFailure for a failed request, CutShort
        for a JSON answer that reached max_tokens, RecipeError
        (``writer_model_unreachable``) when the endpoint cannot be reached or refuses the key or model."""
        params = self.model.inference_parameters
        request: dict[str, Any] = dict(
            model=self.model.model,
            messages=messages,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
        )
        if schema is not None:
            request["max_tokens"] = max(params.max_tokens, answer_tokens(schema) or 0)
            if not self.plain_json:
                request["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema, "strict": True},
                }
        try:
            reply = self._patient(request)
        except openai.BadRequestError as exc:
            if "response_format" not in request or "response_format" not in f"{self._message(exc)} {exc.body}":
                raise ModelFailure(f"400 {self._message(exc)}") from None
            self.plain_json = True  # this endpoint does not take structured outputs
            return self.ask(messages, schema, name)
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
            raise self._refused(f"answered {exc.status_code}: {self._message(exc)}") from None
        except openai.APITimeoutError:  # a slow answer drops its row; the next may be quicker
            raise ModelFailure(f"no answer within timeout_s ({self.model.timeout_s:g} s)") from None
        except openai.APIConnectionError as exc:
            raise self._refused(f"cannot be reached ({exc.__class__.__name__})") from None
        except openai.APIStatusError as exc:
            if 300 <= exc.status_code < 400:
                raise self._refused(f"answered {exc.status_code}, a redirect: name the endpoint it leads to") from None
            raise ModelFailure(f"{exc.status_code} {self._message(exc)}".strip()) from None
        except openai.APIError as exc:
            raise ModelFailure(f"{getattr(exc, 'status_code', '')} {self._message(exc)}".strip()) from None
        with self._lock:
            self.requests += 1
            if reply.usage is not None:
                self.prompt_tokens += reply.usage.prompt_tokens
                self.completion_tokens += reply.usage.completion_tokens
        if not reply.choices:
            raise ModelFailure("the answer has no choices")
        choice = reply.choices[0]
        if schema is not None and choice.finish_reason == "length":
            raise CutShort(f"the answer was cut at max_tokens ({request['max_tokens']}) before its JSON closed")
        return choice.message.content or ""

    def _patient(self, request: dict[str, Any]) -> Any:
        """The completion of ``request``; a 429 (a server that answers one request at a time, such as
        the studio's own /v1, or a rate limit) is asked again after a doubling wait, until
        ``timeout_s`` has passed (the client's own retries give up after seconds)."""
        deadline, wait_s = time.monotonic() + self.model.timeout_s, BUSY_WAIT_S[0]
        while True:
            try:
                return self._client.chat.completions.create(**request)
            except openai.RateLimitError:
                if time.monotonic() + wait_s > deadline:
                    raise
                time.sleep(wait_s)
                wait_s = min(2 * wait_s, BUSY_WAIT_S[1])

    def _message(self, exc: openai.APIError) -> str:
        """The error's message, short (the server's words, which may quote the key it refused: never shown)."""
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body["error"] if isinstance(body.get("error"), dict) else body
        text = str(error.get("message") or exc.message)
        return (text.replace(self._key, "***") if self._key else text)[:200]

    def _refused(self, why: str) -> RecipeError:
        return RecipeError(
            f"model: {shown_endpoint(self.model.endpoint)} (model {self.model.model[:80]}) {why}",
            fields=("endpoint", "model"),
            code=MODEL_UNREACHABLE,
        )
