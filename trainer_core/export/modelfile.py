"""Ollama's ``Modelfile`` beside each GGUF: ``FROM`` the file, ``TEMPLATE`` translated from the run's
chat template, ``PARAMETER stop`` for its end-of-turn tokens, ``SYSTEM`` for the system message the
run was trained with (every training row's, from its ``run.json``), else the one its template adds
when a chat has none. Format: https://github.com/ollama/ollama/blob/main/docs/modelfile.md
(TEMPLATE is a Go ``text/template`` over ``.Messages``, each with ``.Role`` and ``.Content``).

The translation renders the Jinja template with marker texts (``split_turns``) and reads off, per
role, the text before and after a message's content, and the generation prompt; it holds for the
templates that wrap each message on its own (ChatML, Llama 3, Phi-3, Mistral's [INST] with a
system turn, ...) and is verified by rendering other conversations both ways. A template that
folds messages together (Gemma's system message inside the first user turn) gets no TEMPLATE line:
Ollama then uses the template stored in the GGUF, and the Modelfile says so in a comment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

ROLES = ("system", "user", "assistant")
MARK = {"system": "\u2063S0\u2063", "user": "\u2063U{}\u2063", "assistant": "\u2063A{}\u2063"}


@dataclass
class Turns:
    """Per role, the text before (``prefix``) and after (``suffix``) a message's content; the
    generation prompt; the system message the template adds when none is given (or None)."""

    prefix: dict[str, str]
    suffix: dict[str, str]
    generation: str
    default_system: Optional[str]
    preamble: str = ""  # before the first message: the template's own ``{{ bos_token }}``

    def render(self, messages: list[dict[str, str]]) -> str:
        """What the template renders for ``messages`` with the generation prompt."""
        text = "".join(self.prefix[m["role"]] + m["content"] + self.suffix[m["role"]] for m in messages)
        return self.preamble + text + self.generation


def _conversation(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": MARK["system"]}]
    for i in range(turns):
        messages.append({"role": "user", "content": MARK["user"].format(i)})
        if i < turns - 1:
            messages.append({"role": "assistant", "content": MARK["assistant"].format(i)})
    return messages


def split_turns(tokenizer: Any) -> Optional[Turns]:
    """The run's chat template as ``Turns``, or None when it does not wrap each message on its own
    (or has none). Checked on a 3-turn conversation with a system message and on one without."""
    if not isinstance(getattr(tokenizer, "chat_template", None), str):
        return None
    bos = tokenizer.bos_token or ""
    # BOS written by the template: dropped when the runtime adds it (the GGUF's add_bos_token), else
    # kept as the TEMPLATE's preamble
    preamble = "" if _adds_bos(tokenizer) or "bos_token" not in tokenizer.chat_template else bos

    def render(messages: list[dict[str, str]], generation: bool) -> str:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        return text[len(bos) :] if bos and "bos_token" in tokenizer.chat_template and text.startswith(bos) else text

    try:
        full = render(_conversation(2), True)  # S U0 A0 U1 + generation prompt
        gaps = _gaps(full, [m["content"] for m in _conversation(2)])
        suffix_user = _after(render(_conversation(1), False), MARK["user"].format(0))
        suffix_assistant = _after(render(_conversation(2)[:-1], False), MARK["assistant"].format(0))
        without_system = render(_conversation(2)[1:], True)
    except Exception:  # noqa: BLE001 - a template that refuses these conversations cannot be translated
        return None
    if gaps is None or suffix_user is None or suffix_assistant is None:
        return None
    head, sys_user, user_assistant, assistant_user, tail = gaps
    if not (user_assistant.startswith(suffix_user) and assistant_user.startswith(suffix_assistant)):
        return None
    prefix_user = assistant_user[len(suffix_assistant) :]
    if not (sys_user.endswith(prefix_user) and tail.startswith(suffix_user)):
        return None
    turns = Turns(
        prefix={"system": head, "user": prefix_user, "assistant": user_assistant[len(suffix_user) :]},
        suffix={
            "system": sys_user[: len(sys_user) - len(prefix_user)],
            "user": suffix_user,
            "assistant": suffix_assistant,
        },
        generation=tail[len(suffix_user) :],
        default_system=None,
    )
    if turns.render(_conversation(2)[1:]) != without_system:  # the template adds a system message
        added = without_system[: len(without_system) - len(turns.render(_conversation(2)[1:]))]
        body = added[len(head) : len(added) - len(turns.suffix["system"])] if added.startswith(head) else None
        if (
            body is None
            or not added.endswith(turns.suffix["system"])
            or not without_system.endswith(turns.render(_conversation(2)[1:]))
        ):
            return None
        turns.default_system = body
    longer = _conversation(3)
    if render(longer, True) != turns.render(longer):
        return None
    turns.preamble = preamble
    return turns


def _adds_bos(tokenizer: Any) -> bool:
    """Whether the tokenizer puts BOS before every text (the GGUF's ``add_bos_token``)."""
    try:
        ids = tokenizer("a")["input_ids"]
    except Exception:  # noqa: BLE001
        return False
    return bool(ids) and tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id


def _gaps(text: str, contents: list[str]) -> Optional[list[str]]:
    """The texts around ``contents`` in ``text`` (len(contents) + 1 pieces), or None."""
    pieces, at = [], 0
    for content in contents:
        found = text.find(content, at)
        if found < 0:
            return None
        pieces.append(text[at:found])
        at = found + len(content)
    return pieces + [text[at:]]


def _after(text: str, content: str) -> Optional[str]:
    found = text.rfind(content)
    return None if found < 0 else text[found + len(content) :]


def go_template(turns: Turns) -> str:
    """``turns`` as a Go text/template over ``.Messages`` (no whitespace trimming, so every
    character of the chat markup is kept)."""

    def text(value: str) -> str:
        return value.replace("{{", '{{"{{"}}')

    parts = [text(turns.preamble), "{{ range .Messages }}"]
    for i, role in enumerate(ROLES):
        parts.append(
            f'{{{{ {"if" if i == 0 else "else if"} eq .Role "{role}" }}}}'
            f"{text(turns.prefix[role])}{{{{ .Content }}}}{text(turns.suffix[role])}"
        )
    parts.append("{{ end }}{{ end }}" + text(turns.generation))
    return "".join(parts)


def stop_words(tokenizer: Any, turns: Optional[Turns]) -> list[str]:
    """The end-of-turn texts generation stops at: the EOS token and the special tokens that close
    an assistant turn in the template."""
    words = [tokenizer.eos_token] if tokenizer.eos_token else []
    if turns is not None:
        specials = set(getattr(tokenizer, "all_special_tokens", []) or [])
        words += [s for s in specials if s in turns.suffix["assistant"]]
    return list(dict.fromkeys(w for w in words if w))


def modelfile(gguf_name: str, tokenizer: Any, system: Optional[str] = None, projector: Optional[str] = None) -> str:
    """The Modelfile's text for the GGUF ``gguf_name`` (in the same folder). ``SYSTEM`` is
    ``system`` (the system message the run was trained with, ``trained_system``), else the one the
    chat template adds when none is given; ``projector``: the name of a vision model's mmproj file
    (a second ``FROM``, as Ollama imports vision models). A TEMPLATE or SYSTEM text holding three double quotes
    cannot be quoted in a Modelfile (they would end it early and the rest could read as
    directives): it is left out, with a comment saying so."""
    turns = split_turns(tokenizer)
    lines = [f"# Ollama: ollama create NAME -f {Path(gguf_name).stem}.Modelfile", f"FROM ./{gguf_name}"]
    if projector:  # a vision-language model: Ollama takes its projector as a second FROM
        lines.append(f"FROM ./{projector}")
    template = go_template(turns) if turns is not None else None
    if template is None:
        lines.append("# TEMPLATE: this chat template cannot be written per message; Ollama uses the one in the GGUF")
    elif '"""' in template:
        lines.append(
            '# TEMPLATE: the chat template holds """ and cannot be quoted here; Ollama uses the one in the GGUF'
        )
    else:
        lines.append(f'TEMPLATE """{template}"""')
    lines += [f"PARAMETER stop {json.dumps(word)}" for word in stop_words(tokenizer, turns)]
    system = system if system is not None else (turns.default_system if turns is not None else None)
    if system and '"""' in system:
        lines.append('# SYSTEM: the system message holds """ and cannot be quoted here; give it in your chat')
    elif system:
        lines.append(f'SYSTEM """{system}"""')
    return "\n".join(lines) + "\n"


def trained_system(weights: Path) -> Optional[str]:
    """The system message every training row of the run had (``system_message`` in the
    ``run.json`` of the weights folder or, for a checkpoint, of its run folder); None when unknown."""
    for folder in (Path(weights), Path(weights).parent):
        try:
            value = json.loads((folder / "run.json").read_text(encoding="utf-8")).get("system_message")
        except (OSError, ValueError, AttributeError):
            continue
        return value if isinstance(value, str) and value else None
    return None


def write_modelfile(gguf: Path, tokenizer: Any, system: Optional[str] = None, projector: Optional[Path] = None) -> Path:
    """Write ``<gguf stem>.Modelfile`` beside ``gguf`` (``SYSTEM``: see ``modelfile``; ``projector``:
    a vision-language model's mmproj file beside it, a second ``FROM``); its path."""
    path = gguf.with_suffix(".Modelfile")
    path.write_text(modelfile(gguf.name, tokenizer, system, projector.name if projector else None), encoding="utf-8")
    return path
