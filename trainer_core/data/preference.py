"""Preference data as users bring it, in TRL's conversational preference forms.

Two canonical forms (TRL's "conversational" dataset types, https://huggingface.co/docs/trl/dataset_formats):

- pairs (DPO, ORPO; KTO after unpairing): ``prompt`` (messages up to the user's last turn),
  ``chosen`` and ``rejected`` (the assistant answer(s) that follow, as message lists);
- unpaired (KTO): ``prompt``, ``completion`` (message lists) and ``label`` (True: desirable).

Layouts read, detected from the columns:

- ``prompt`` / ``chosen`` / ``rejected``, each a string or a message list (TRL's explicit prompt);
- ShareGPT ``conversations`` (or ``messages``) + ``chosen`` / ``rejected``, where each answer is a
  ``{"from", "value"}`` turn, a list of turns or a string (LLaMA-Factory's ``dpo_en_demo.json``);
- ``chosen`` / ``rejected`` alone, each the whole conversation (TRL's implicit prompt: the shared
  leading turns are the prompt);
- KTO: ``prompt`` + ``completion`` + ``label``, or ``messages`` / ``conversations`` + ``label`` (the
  last assistant turn is the completion).

Roles, tool wrapping, content parts and numbers-as-text follow the SFT layouts (``formats``), so a
row renders through the model's chat template exactly as SFT renders it; TRL scores only the answer
tokens (prompt tokens are never scored). Row numbers in errors are 1-based rows of the file.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import conversation_turns, text_field, turn_text
from trainer_core.data.media import refuse_media
from trainer_core.data.text_values import TextConversions
from trainer_core.vocabulary import FormatType, TrainingMethod

_MESSAGES = datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")})
PAIR_FEATURES = datasets.Features({"prompt": _MESSAGES, "chosen": _MESSAGES, "rejected": _MESSAGES})
UNPAIRED_FEATURES = datasets.Features({"prompt": _MESSAGES, "completion": _MESSAGES, "label": datasets.Value("bool")})
PAIR_LAYOUTS = (
    "prompt + chosen + rejected, conversations (ShareGPT) or messages + chosen + rejected, "
    "or chosen + rejected holding whole conversations"
)
UNPAIRED_LAYOUTS = "prompt + completion + label, or messages (or conversations) + label"
log = logging.getLogger(__name__)
METHOD_NAMES = {TrainingMethod.dpo: "DPO", TrainingMethod.orpo: "ORPO", TrainingMethod.kto: "KTO"}


def is_preference(columns: list[str]) -> bool:
    """Whether ``columns`` hold preference pairs (a ``chosen`` or ``rejected`` column)."""
    return bool({"chosen", "rejected"} & set(columns))


def detect_preference_format(columns: list[str], method: TrainingMethod, source: str) -> FormatType:
    """The preference layout of ``columns`` for ``method`` (dpo / orpo / kto): ``preference`` (pairs)
    or ``unpaired`` (KTO rows with a label). Raises DatasetError, naming ``source`` and the fix, when
    the data does not fit the method: SFT rows (no chosen / rejected, no label), unpaired rows for
    DPO / ORPO, or pairs missing one side."""
    names = set(columns)
    method_name = METHOD_NAMES[method]
    if is_preference(columns):
        if not {"chosen", "rejected"} <= names:
            have = "chosen" if "chosen" in names else "rejected"
            raise DatasetError(
                f"{source} has a {have!r} column but no {({'chosen', 'rejected'} - {have}).pop()!r} "
                f"column: preference pairs need both ({PAIR_LAYOUTS})"
            )
        return FormatType.preference
    unpaired = "label" in names and ({"prompt", "completion"} <= names or {"messages", "conversations"} & names)
    if unpaired and method == TrainingMethod.kto:
        return FormatType.unpaired
    if unpaired:
        raise DatasetError(
            f"{source} holds unpaired rows with a 'label' (KTO data), but {method_name} trains on pairs "
            f"of a chosen and a rejected answer: use training_method 'kto' for this file, or give "
            f"{method_name} pairs ({PAIR_LAYOUTS})",
            fields=("training_method",),
        )
    wanted = (
        f"pairs ({PAIR_LAYOUTS})"
        if method != TrainingMethod.kto
        else (f"rows with a desirable/undesirable label ({UNPAIRED_LAYOUTS}) or pairs ({PAIR_LAYOUTS})")
    )
    raise DatasetError(
        f"{source} has columns {list(columns)}: supervised (SFT) data, with no chosen/rejected answers. "
        f"{method_name} needs {wanted}. Train on this file with training_method 'sft', or map your "
        "columns with custom_format_mapping",
        fields=("training_method", "custom_format_mapping"),
    )


def normalize_preference(
    dataset: datasets.Dataset, fmt: FormatType, source: str, first_row: int = 1
) -> tuple[datasets.Dataset, list[str]]:
    """``dataset`` in its canonical form (``PAIR_FEATURES`` for ``preference``, ``UNPAIRED_FEATURES``
    for ``unpaired``) and notes on values turned into text. Raises DatasetError naming the file, the
    row and the problem (an empty answer, a prompt without a user turn, a label that is not
    true/false, a row with images, audio or video: ``media.refuse_media``, ...)."""
    refuse_media(dataset, source, first_row)
    build = _pair if fmt == FormatType.preference else _unpaired
    out, conversions = [], TextConversions()
    for index, row in enumerate(dataset.to_list()):
        try:
            out.append(build(row, conversions))
        except RowError as exc:
            raise DatasetError(f"{source}, row {first_row + index}: {exc}") from None
    features = PAIR_FEATURES if fmt == FormatType.preference else UNPAIRED_FEATURES
    columns = {name: [row[name] for row in out] for name in features}
    return datasets.Dataset.from_dict(columns, features=features), conversions.notes()


def unpair(pairs: datasets.Dataset) -> datasets.Dataset:
    """Pairs as KTO rows: each pair gives (prompt, chosen, label True) and (prompt, rejected, label
    False), in that order (TRL's ``unpair_preference_dataset`` does the same)."""
    prompts, completions, labels = [], [], []
    for row in pairs:
        prompts += [row["prompt"], row["prompt"]]
        completions += [row["chosen"], row["rejected"]]
        labels += [True, False]
    return datasets.Dataset.from_dict(
        {"prompt": prompts, "completion": completions, "label": labels}, features=UNPAIRED_FEATURES
    )


def _turns(value: Any, field: str, conv: TextConversions, role: str) -> list[dict[str, str]]:
    """A string (one ``role`` turn), one turn dict, or a list of turns, as our messages."""
    if isinstance(value, str) or isinstance(value, (int, float)) and not isinstance(value, bool):
        text = text_field({field: value}, field, conv)
        return [{"role": role, "content": text}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        kind = "missing" if value is None else f"a {type(value).__name__}"
        raise RowError(f'field {field!r} is {kind}: give a text or a list of {{"role", "content"}} turns')
    return [turn_text(turn, position, conv, field) for position, turn in enumerate(value, start=1)]


def _answer(value: Any, prompt: list[dict[str, str]], field: str, conv: TextConversions) -> list[dict[str, str]]:
    """The answer turns of ``field``: the prompt's turns are dropped when the answer repeats them."""
    turns = _turns(value, field, conv, "assistant")
    if turns[: len(prompt)] == prompt and len(turns) > len(prompt):
        turns = turns[len(prompt) :]
    if turns[0]["role"] != "assistant":
        raise RowError(
            f"field {field!r} starts with a {turns[0]['role']} turn: the answer must start with an "
            "assistant (gpt) turn that follows the prompt"
        )
    if any(not t["content"].strip() for t in turns if t["role"] == "assistant"):
        raise RowError(f"field {field!r} has an empty assistant turn: fill it in or remove the row")
    return turns


def _prompt(turns: list[dict[str, str]], row: dict, field: str, conv: TextConversions) -> list[dict[str, str]]:
    """The prompt turns with the row's ``system`` / ``tools`` merged in; it must end where the model
    answers (after a user or tool turn)."""
    if not turns:
        raise RowError(f"field {field!r} is empty: give the conversation the answers reply to")
    messages = conversation_turns(turns, row, conv, tools_block=True)  # TRL renders: the fallback block
    if messages[-1]["role"] not in ("user", "tool"):
        raise RowError(
            f"field {field!r} ends with a {messages[-1]['role']} turn: the prompt must end with the "
            "user's (human) turn that the chosen and rejected answers reply to"
        )
    return messages


def _shared_prefix(chosen: list[dict[str, str]], rejected: list[dict[str, str]]) -> int:
    count = 0
    while count < min(len(chosen), len(rejected)) and chosen[count] == rejected[count]:
        count += 1
    while count and chosen[count - 1]["role"] == "assistant":  # the answers start at an assistant turn
        count -= 1
    return count


def _pair(row: dict, conv: TextConversions) -> dict[str, Any]:
    context_field = next((name for name in ("conversations", "messages", "prompt") if row.get(name) is not None), None)
    if context_field is None:  # implicit prompt: chosen and rejected are whole conversations
        chosen = _turns(row.get("chosen"), "chosen", conv, "assistant")
        rejected = _turns(row.get("rejected"), "rejected", conv, "assistant")
        shared = _shared_prefix(chosen, rejected)
        if not shared:
            raise RowError(
                "fields 'chosen' and 'rejected' share no leading turns and there is no 'prompt': give the "
                "prompt in a 'prompt' (or 'conversations') field, or whole conversations in both"
            )
        prompt = _prompt(chosen[:shared], row, "chosen", conv)
        chosen, rejected = chosen[shared:], rejected[shared:]
    else:
        raw = _turns(row.get(context_field), context_field, conv, "user")
        prompt = _prompt(raw, row, context_field, conv)
        chosen, rejected = row.get("chosen"), row.get("rejected")
    return {
        "prompt": prompt,
        "chosen": _answer(chosen, prompt, "chosen", conv),
        "rejected": _answer(rejected, prompt, "rejected", conv),
    }


def _label(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise RowError(f"field 'label' is {value!r}: give true (a desirable answer) or false (an undesirable one)")


def _unpaired(row: dict, conv: TextConversions) -> dict[str, Any]:
    label = _label(row.get("label"))
    if row.get("completion") is not None and row.get("prompt") is not None:
        prompt = _prompt(_turns(row["prompt"], "prompt", conv, "user"), row, "prompt", conv)
        return {"prompt": prompt, "completion": _answer(row["completion"], prompt, "completion", conv), "label": label}
    field = "messages" if row.get("messages") is not None else "conversations"
    turns = _turns(row.get(field), field, conv, "user")
    last = max((i for i, t in enumerate(turns) if t["role"] == "assistant"), default=None)
    if last is None or last == 0:
        raise RowError(f"field {field!r} has no assistant turn after the prompt: KTO rates the last assistant answer")
    while last > 0 and turns[last - 1]["role"] == "assistant":
        last -= 1
    prompt = _prompt(turns[:last], row, field, conv)
    return {"prompt": prompt, "completion": _answer(turns[last:], prompt, field, conv), "label": label}


def pair_count_note(rows: int, method: TrainingMethod, unpaired_from_pairs: Optional[bool]) -> str:
    """What the rows are for ``method``: e.g. "300 preference pairs" or "600 KTO rows (300 pairs unpaired)"."""
    if method == TrainingMethod.kto and unpaired_from_pairs:
        return f"{rows} KTO rows ({rows // 2} pairs unpaired: chosen desirable, rejected undesirable)"
    return f"{rows} KTO rows" if method == TrainingMethod.kto else f"{rows} preference pairs"


def canonical_preference(
    dataset: datasets.Dataset, request: Any, source: str, first_row: int = 1
) -> tuple[datasets.Dataset, FormatType]:
    """One source's rows for ``request.training_method`` (dpo / orpo / kto) in canonical form, and
    its layout: detected from the columns (or ``request.format_type`` when it is ``preference`` or
    ``unpaired``); KTO unpairs pairs (``unpair``). Raises DatasetError when the data does not fit
    the method (see ``detect_preference_format``) or a row is bad (``normalize_preference``)."""
    method = request.training_method
    fmt = request.format_type
    if fmt == FormatType.auto:
        fmt = detect_preference_format(dataset.column_names, method, source)
    elif fmt not in (FormatType.preference, FormatType.unpaired):
        raise DatasetError(
            f"format_type {fmt.value!r} is {'GRPO' if fmt == FormatType.prompt_only else 'SFT'} data, but "
            f"training_method {method.value!r} needs "
            "preference data: set format_type to auto, preference or unpaired",
            fields=("format_type", "training_method"),
        )
    elif fmt == FormatType.unpaired and method != TrainingMethod.kto:
        raise DatasetError(
            f"format_type 'unpaired' (rows with a label) is KTO data: {METHOD_NAMES[method]} needs "
            "pairs (format_type preference), or choose training_method kto",
            fields=("format_type", "training_method"),
        )
    rows, notes = normalize_preference(dataset, fmt, source, first_row)
    for note in notes:
        log.info("%s: %s", source, note)
    if method == TrainingMethod.kto and fmt == FormatType.preference:
        log.info("%s: %d pairs unpaired into %d KTO rows", source, len(rows), 2 * len(rows))
        rows = unpair(rows)
    log.info("%s: format %s, %d rows", source, fmt.value, len(rows))
    return rows, fmt


def detect_layout(columns: list[str], method: TrainingMethod, source: str) -> FormatType:
    """The layout of ``columns`` for a run of ``method``: the SFT layouts for ``sft``
    (``formats.detect_format``), the preference ones otherwise. Raises DatasetError as they do."""
    if method == TrainingMethod.sft:
        from trainer_core.data.formats import detect_format

        return detect_format(columns, source)
    if method == TrainingMethod.grpo:
        from trainer_core.data.prompts import prompt_layout

        prompt_layout(columns, source)  # refuses a source without prompts
        return FormatType.prompt_only
    return detect_preference_format(columns, method, source)


def preferred_conversations(rows: datasets.Dataset) -> datasets.Dataset:
    """Canonical preference rows as SFT conversations (column ``messages``) of the preferred answers:
    prompt + chosen for pairs, prompt + completion for desirable KTO rows (undesirable ones are
    left out). What evaluation scores a preference run on (loss and generation on the answers it
    was taught to prefer)."""
    from trainer_core.data.formats import MESSAGE_FEATURES

    if "chosen" in rows.column_names:
        messages = [prompt + chosen for prompt, chosen in zip(rows["prompt"], rows["chosen"])]
    else:
        messages = [
            prompt + answer for prompt, answer, label in zip(rows["prompt"], rows["completion"], rows["label"]) if label
        ]
    return datasets.Dataset.from_dict({"messages": messages}, features=MESSAGE_FEATURES)
