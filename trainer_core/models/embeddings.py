"""The embeddings of a loaded model, found in it (``get_input_embeddings`` / ``get_output_embeddings``),
never by one family's names: Llama's ``model.embed_tokens`` and ``lm_head``, GPT-2's
``transformer.wte``, GPT-NeoX's ``gpt_neox.embed_in`` and ``embed_out``, ...

Two uses: checking ``modules_to_save`` (modules trained in full beside the LoRA adapters and saved
with them, matched as PEFT matches them: the module's path or its end after a dot,
``peft.utils.other._get_submodules`` / ``ModulesToSaveWrapper``), and finding the parameters that
``embedding_learning_rate`` applies to (Unsloth's ``UnslothTrainer`` puts the trained embeddings and
LM head in their own optimizer group the same way).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainer_core.models.targets import TargetError


def embedding_modules(model: Any) -> dict[str, str]:
    """Path -> role ("input embeddings" / "output layer") of ``model``'s embedding modules; a tied
    output layer is its own module with a shared weight, listed under its own path."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    found: dict[str, str] = {}
    given = base.get_input_embeddings()
    out = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    for name, module in base.named_modules():
        if module is given:
            found[name] = "input embeddings"
        elif out is not None and module is out:
            found[name] = "output layer"
    return found


def _matches(path: str, name: str) -> bool:
    return path == name or path.endswith("." + name)


def check_modules_to_save(model: Any, names: Iterable[str]) -> list[str]:
    """The modules of ``model`` (paths) that ``names`` select, as PEFT matches ``modules_to_save``.
    Raises ``TargetError`` naming ``modules_to_save`` for a name that matches no module, listing
    the model's embedding modules (what the field is for)."""
    paths = [path for path, _ in model.named_modules() if path]
    chosen: list[str] = []
    for name in names:
        hits = [path for path in paths if _matches(path, name)]
        if not hits:
            have = ", ".join(f"{path} ({role})" for path, role in embedding_modules(model).items())
            raise TargetError(
                f"modules_to_save: {name!r} matches no module of {type(model).__name__}; "
                f"its embeddings are {have or 'not found'}"
            )
        chosen.extend(hits)
    return list(dict.fromkeys(chosen))


def check_tied_pair(model: Any, chosen: list[str]) -> None:
    """Refuse ``modules_to_save`` paths ``chosen`` that PEFT cannot keep tied. On a model that ties its
    output layer to its input embeddings, PEFT (0.17+, ``ensure_weight_tying``) ties the trained
    copies, and ties them again when the adapter is loaded, only when the input embeddings are named
    ``embed_tokens`` (``peft.utils.constants.EMBEDDING_LAYER_NAMES``): GPT-2's ``transformer.wte``
    trains tied but reloads untied (chat and the merged export would read the old LM head; measured
    with PEFT 0.21). Raises ``TargetError`` naming ``modules_to_save``."""
    if not ties_embeddings(model):
        return
    found = embedding_modules(model)
    if not any(path in found for path in chosen):
        return
    given = next(path for path, role in found.items() if role == "input embeddings")
    if given.rsplit(".", 1)[-1] != "embed_tokens":
        raise TargetError(
            f"modules_to_save: {type(model).__name__} ties its output layer to its input embeddings "
            f"({', '.join(found)}), and PEFT keeps a trained pair tied after saving only when the input "
            "embeddings are named embed_tokens; train them with training_type full, or leave them out of modules_to_save"
        )


def ties_embeddings(model: Any) -> bool:
    """True when ``model``'s output layer shares the input embeddings' weight (tied). Input
    embeddings without one ``weight`` (CSM's: text and codebook tables) tie nothing."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    out = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    return out is not None and out.weight is getattr(base.get_input_embeddings(), "weight", None)


def embedding_parameters(model: Any) -> list[Any]:
    """The trainable parameters inside ``model``'s input embeddings and output layer: the weights
    themselves in full fine-tuning, PEFT's trained copies (``modules_to_save``) or LoRA adapters
    on them with LoRA; a shared (tied) weight once."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    modules = [base.get_input_embeddings()]
    if hasattr(base, "get_output_embeddings") and base.get_output_embeddings() is not None:
        modules.append(base.get_output_embeddings())
    seen: dict[int, Any] = {}
    for module in modules:
        for parameter in module.parameters():
            if parameter.requires_grad:
                seen.setdefault(id(parameter), parameter)
    return list(seen.values())
