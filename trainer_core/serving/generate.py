"""Render a conversation as training did and generate an answer token by token.

The prompt is the tokenizer's chat template with the generation prompt (``<|im_start|>assistant\\n``
in ChatML), tokenized without adding special tokens, exactly as ``data.tokenization`` renders rows
for training. Generation is ``model.generate`` (KV cache on) with a streamer that decodes each new
token into text as soon as it forms whole characters; it ends at the tokenizer's end-of-turn / eos
token (``stop``), at ``max_new_tokens`` (``length``) or when the stop flag is set (``cancelled``).
An optional ``tools.constrain.Constraint`` (a JSON schema between a literal prefix and suffix) is
enforced as ``model.generate``'s ``logits_processor``; until its JSON has closed the answer cannot
end with ``stop``.
Shared by the inference worker and ``python -m trainer_core chat``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.loader import LoadedModel
from trainer_core.serving.schemas import GenerationSettings
from trainer_core.serving.threads import cpu_threads

if TYPE_CHECKING:
    from trainer_core.tools.constrain import Constraint

END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")  # ChatML, Llama 3, Phi-3, Gemma


def text_only(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``messages`` without the ``images`` / ``audios`` keys, for a text-only model. Raises
    ChatInputError when a message has an image or an audio clip (the model would never see it)."""
    for i, message in enumerate(messages):
        if message.get("images"):
            raise ChatInputError(
                f"messages[{i}]: it holds an image and this model reads text only: choose a vision-language model's "
                "run, or send text",
                fields=("messages",),
            )
        if message.get("audios"):
            raise ChatInputError(
                f"messages[{i}]: it holds an audio clip and this model reads text only: choose an audio chat model's "
                "run, or send text",
                fields=("messages",),
            )
    return [{"role": m["role"], "content": m["content"]} for m in messages]


@dataclass
class Finish:
    """How one generation ended: ``reason`` stop | length | cancelled, and the token counts."""

    reason: str
    prompt_tokens: int
    completion_tokens: int
    text: str  # the whole answer


def render_prompt(
    tokenizer: Any, messages: list[dict[str, str]], tools: Optional[list[dict[str, Any]]] = None
) -> list[int]:
    """Token ids of ``messages`` (dicts with role and content, in our canonical form for tools) plus
    the generation prompt, rendered by the chat template with ``tools`` (``tools.render``'s
    ``template_conversation``, then shaped as training shapes its data: ``data.template_fit``) and
    tokenized without special tokens (as training does). Raises ChatInputError when a call in the
    conversation is not valid or the template cannot render the conversation."""
    from jinja2 import TemplateError

    from trainer_core.data.template_fit import fit_conversation, template_fit
    from trainer_core.tools.definitions import ToolsError
    from trainer_core.tools.render import template_conversation

    try:
        messages, extra = template_conversation(tokenizer, messages, tools or [])
    except ToolsError as exc:
        raise ChatInputError(f"messages: {exc}", fields=("messages",)) from None
    messages = fit_conversation(messages, template_fit(tokenizer))  # shaped as training shaped its data
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **extra)
    except (TemplateError, ValueError, TypeError) as exc:
        raise ChatInputError(
            f"messages: the chat template of this model cannot render the conversation: {exc}", fields=("messages",)
        ) from None
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def prompt_inputs(
    loaded: LoadedModel,
    messages: list[dict[str, Any]],
    tools: Optional[list[dict[str, Any]]] = None,
    raw_prompt: Optional[str] = None,
) -> dict[str, Any]:
    """``model.generate``'s inputs (``input_ids`` (1, T) and a model kind's own, e.g. pixel_values):
    ``raw_prompt`` tokenized as it is (the tokenizer's own special tokens added, no chat template), else
    ``messages`` with ``tools`` rendered by the model kind or the chat template (``render_prompt``)."""
    import torch

    if raw_prompt is not None:
        ids = loaded.tokenizer(raw_prompt)["input_ids"]
        return {"input_ids": torch.tensor([ids], device=loaded.device)}  # (1, T)
    inputs = loaded.kind.chat_inputs(loaded.extra.get("processor"), messages, loaded.device)
    if inputs is None:  # the text path
        ids = render_prompt(loaded.tokenizer, text_only(messages), tools)
        inputs = {"input_ids": torch.tensor([ids], device=loaded.device)}  # (1, T)
    return inputs


def stop_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """The eos token, the model's generation eos ids and the end-of-turn tokens the vocabulary has."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in END_OF_TURN if token in vocab)
    return sorted(i for i in ids if isinstance(i, int))


def generate_kwargs(settings: GenerationSettings) -> dict[str, Any]:
    """``model.generate`` keyword arguments for ``settings`` (temperature 0: greedy)."""
    kwargs: dict[str, Any] = {"max_new_tokens": settings.max_new_tokens, "use_cache": True}
    if settings.temperature == 0:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    else:
        kwargs.update(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k)
    if settings.repetition_penalty != 1.0:
        kwargs["repetition_penalty"] = settings.repetition_penalty
    return kwargs


class _Streamer:
    """A ``generate`` streamer: decodes new tokens incrementally (only whole characters: a token
    that ends mid-way through a UTF-8 sequence waits for the next) and hands text to ``on_text``.
    Special tokens are left out, unless ``keep_special`` lists the ones to leave out (the stop
    tokens) and keeps the rest: a family's call markers (``[TOOL_CALLS]``, ``<|python_tag|>``,
    harmony's ``<|call|>``) are special tokens, and ``tools.parse`` reads them."""

    def __init__(
        self, tokenizer: Any, on_text: Callable[[str], None], keep_special: Optional[Collection[int]] = None
    ) -> None:
        self.tokenizer, self.on_text = tokenizer, on_text
        self.keep_special = keep_special
        self.ids: list[int] = []
        self.prompt_seen = False
        self.prefix, self.read = 0, 0  # ids[prefix:read] were decoded already; their text is sent
        self.sent = ""

    def _decode(self, ids: list[int]) -> str:
        if self.keep_special is None:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode([i for i in ids if i not in self.keep_special], skip_special_tokens=False)

    def put(self, value: Any) -> None:  # (1, T) prompt first, then (1,) or (1, 1) per new token
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.ids.extend(value.reshape(-1).tolist())
        before = self._decode(self.ids[self.prefix : self.read])
        now = self._decode(self.ids[self.prefix :])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self._send(now[len(before) :])
            self.prefix, self.read = self.read, len(self.ids)

    def _send(self, text: str) -> None:
        self.sent += text
        self.on_text(text)

    def end(self) -> None:
        whole = self._decode(self.ids)
        if whole.startswith(self.sent) and len(whole) > len(self.sent):
            self._send(whole[len(self.sent) :])


def _stop_criteria(should_stop: Callable[[], bool]) -> Any:
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopFlag(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), should_stop(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopFlag()])


def generate(
    loaded: LoadedModel,
    messages: list[dict[str, str]],
    settings: GenerationSettings,
    on_text: Callable[[str], None],
    should_stop: Callable[[], bool] = lambda: False,
    use_adapter: bool = True,
    tools: Optional[list[dict[str, Any]]] = None,
    raw_prompt: Optional[str] = None,
    constraint: Optional[Constraint] = None,
) -> Finish:
    """Answer ``messages`` with ``loaded``, calling ``on_text`` with each new piece of text. Seeds
    torch with ``settings.seed`` first. A model kind with inputs of its own makes them
    (``ModelKind.chat_inputs``: a vision-language model reads the messages' images); a text-only
    model refuses images (``text_only``). ``tools`` (``tool_list`` form) go to the chat template
    (and the answer keeps its special tokens but the stop tokens: see ``_Streamer``);
    ``raw_prompt``: a text answered instead of ``messages`` (no chat template). ``constraint``: the
    answer is forced to its prefix + JSON + suffix (finish ``length`` when it had not closed by
    ``max_new_tokens``). Raises ChatInputError when the prompt plus ``max_new_tokens`` exceeds the
    model's context, the template fails or an image cannot be used; SchemaNotSupported when the
    constraint's schema does not compile."""
    import torch

    inputs = prompt_inputs(loaded, messages, tools, raw_prompt)
    prompt = inputs["input_ids"][0].tolist()
    room = loaded.context_tokens - settings.max_new_tokens
    if len(prompt) > room:
        raise ChatInputError(
            f"the conversation is {len(prompt)} tokens long; with max_new_tokens={settings.max_new_tokens} the model's "
            f"context of {loaded.context_tokens} tokens leaves room for {max(room, 0)}: clear the chat, shorten the "
            "messages or lower max_new_tokens",
            fields=("max_new_tokens",),
        )
    input_ids = inputs.pop("input_ids")
    inputs.pop("attention_mask", None)
    if "stops" not in loaded.extra:  # get_vocab() takes ~20 ms: once per loaded model
        loaded.extra["stops"] = stop_token_ids(loaded.tokenizer, loaded.model)
    stops = loaded.extra["stops"]
    keep = {*stops, loaded.tokenizer.pad_token_id} if tools else None  # calls' special markers kept
    streamer = _Streamer(loaded.tokenizer, on_text, keep)
    processor = constraint.processor(loaded.tokenizer, stops) if constraint is not None else None
    torch.manual_seed(settings.seed)
    with loaded.weights(use_adapter) as model, torch.inference_mode(), cpu_threads(loaded.device):
        output = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            **inputs,  # a vision model's pixel_values, image_grid_thw, ...
            streamer=streamer,
            eos_token_id=stops,
            pad_token_id=loaded.tokenizer.pad_token_id,
            stopping_criteria=_stop_criteria(should_stop),
            logits_processor=[processor] if processor is not None else None,
            **generate_kwargs(settings),
        )
    streamer.end()
    completion = output[0, len(prompt) :].tolist()
    if completion and completion[-1] in stops and (processor is None or processor.accepted):
        reason = "stop"
    elif should_stop():
        reason = "cancelled"
    else:
        reason = "length" if len(completion) >= settings.max_new_tokens or processor is not None else "stop"
    return Finish(reason, len(prompt), len(completion), streamer.sent)


def warm_up(loaded: LoadedModel) -> None:
    """One 1-token generation, so the first real answer does not pay for first-call set-up
    (~0.2 s on CPU here; see bench/chat.py)."""
    try:
        generate(
            loaded,
            [{"role": "user", "content": "Hi"}],
            GenerationSettings(temperature=0, max_new_tokens=1),
            on_text=lambda text: None,
        )
    except ChatInputError:  # a template that cannot render this: each request will say so
        pass
