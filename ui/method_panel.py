"""The Train form's training method: SFT, a preference method (DPO / ORPO / KTO) or GRPO, with the
settings of the chosen method only, a learning rate that follows the method while the user has not
set one, and for GRPO the reward library: picking a reward adds its line (with its default
settings and weight 1) to the Rewards box, where the weight and settings can be edited."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import gradio as gr

from trainer_core.fieldmeta import default, field_methods, group, method_default
from trainer_core.request.sections import SECTIONS
from trainer_core.rewards.schemas import RewardSpec, reward_line
from trainer_core.vocabulary import Phase, TrainingMethod
from ui.form import FORM_FIELDS, make_widget

NEW_ADAPTER = ("none: a new adapter", "")
ADAPTER_RUNS = 200  # the newest runs whose adapters *Start from adapter* offers
_ADAPTERS: weakref.WeakKeyDictionary[Any, tuple[tuple, list]] = weakref.WeakKeyDictionary()  # store -> (key, choices)


def adapter_choices(runs: list[Any]) -> list[tuple[str, str]]:
    """(label, output folder) of the runs whose output folder holds a LoRA adapter (completed LoRA /
    QLoRA runs, newest first), after "none", for *Start from adapter*; e.g.
    ``identity-sft · sft · lora · identity.json``."""
    listed = [NEW_ADAPTER]
    for run in runs:
        if run.phase != Phase.completed or not (Path(run.output_dir) / "adapter_config.json").is_file():
            continue
        request = run.request
        data = ", ".join(Path(p).name for p in request.get("local_datasets") or []) or request.get("hf_dataset") or "-"
        listed.append(
            (
                f"{run.name or run.job_id} · {request.get('training_method', 'sft')} · "
                f"{request.get('training_type', '')} · {data}",
                run.output_dir,
            )
        )
    return listed


def refresh_adapters(store: Any) -> Any:
    """The *Start from adapter* picker's choices now (page load: runs finished since the page was
    built), from the newest ``ADAPTER_RUNS`` runs; kept while the history is unchanged
    (``RunStore.changes``), so a page load reads no run then (an adapter folder deleted by hand
    is still offered until the history next changes)."""
    if store is None:
        return gr.update(choices=adapter_choices([]))
    key, kept = store.changes(), _ADAPTERS.get(store)
    if kept is None or kept[0] != key:
        kept = (key, adapter_choices(store.list_runs(limit=ADAPTER_RUNS)))
        _ADAPTERS[store] = kept
    return gr.update(choices=kept[1])


def build(store: Any = None) -> dict[str, gr.components.Component]:
    """The method section (open, ``#section-method``): its widgets by field name, those of other
    methods than the default hidden; *Start from adapter* lists the adapters of ``store``'s runs
    (``adapter_choices``) and takes any typed folder."""
    adapters = adapter_choices(store.list_runs(limit=ADAPTER_RUNS) if store is not None else [])
    with gr.Accordion(SECTIONS["method"].form, open=True, elem_id="section-method"):
        widgets = {}
        for name in (name for name in FORM_FIELDS if group(name) == "method"):
            if name == "rewards":  # the library's picker just above the box it fills
                widgets[LIBRARY] = _library()
            widgets[name] = make_widget(name, adapters if name == "adapter_name_or_path" else None)
    for name, visible in method_visibility(default("training_method")).items():
        widgets[name].visible = visible
    widgets[LIBRARY].visible = default("training_method") == "grpo"
    return widgets


def _library() -> gr.Dropdown:
    return gr.Dropdown(
        choices=REWARD_LIBRARY,
        value=None,
        label="Add a reward",
        info="Adds the reward's line to Rewards below; edit its weight and settings there.",
        elem_id="reward-library",
    )


LIBRARY = "_reward_library"  # not a request field: the picker that fills the Rewards box
# (label, the line it adds): the built-in rewards (rewards.library) and a code reward from reward_file
REWARD_LIBRARY = [
    ("numeric match: the final answer equals the answer column as a number (1 / 0)", "numeric_match"),
    ("exact match: the final answer equals the answer column as text (1 / 0)", "exact_match"),
    ("format: the whole completion matches a pattern (<think>…</think><answer>…</answer>)", "format"),
    ("length: closeness to a target length in tokens (0..1), or shorter is better", "length target_length=100"),
    ("json: valid JSON, optionally matching a JSON schema (1 / 0)", "json"),
    ("repetition: minus the share of repeated 3-grams (-1..0)", "repetition"),
    ("language: share of letters in a script (latin, cyrillic, cjk, ...)", "language script=latin"),
    ("code: a function from the reward functions file", "code function=my_reward"),
]


def add_reward(choice: Any, current: Any) -> tuple[Any, Any]:
    """The Rewards box with ``choice``'s line appended (weight 1 and its default settings), and the
    picker cleared for the next pick."""
    if not choice:
        return gr.skip(), gr.skip()
    from trainer_core.rewards.schemas import parse_reward

    line = reward_line(RewardSpec(**parse_reward(choice)))
    text = (current or "").rstrip("\n")
    return (f"{text}\n{line}" if text else line), gr.update(value=None)


def method_visibility(method: str) -> dict[str, bool]:
    """Field name -> whether it applies to ``method``, for the fields that apply to some methods only
    (``methods`` in their schema metadata)."""
    return {name: method in methods for name in FORM_FIELDS if (methods := field_methods(name))}


def _follow(name: str, method: str, value: Any) -> Any:
    """An update to ``method``'s default when ``value`` is still some method's default; a value the
    user set stays (``gr.skip``)."""
    at_a_default = {method_default(name, m.value) for m in TrainingMethod}
    return gr.update(value=method_default(name, method)) if value in at_a_default else gr.skip()


def method_rate(method: str, learning_rate: Any) -> Any:
    """The user chose another training method: a learning rate still at a method default (SFT's,
    the preference methods' or GRPO's) becomes the new method's default; one the user set stays."""
    return _follow("learning_rate", method, learning_rate)


def method_beta(method: str, beta: Any) -> Any:
    """The user chose another training method: a beta still at a method default (the preference
    methods' beta, GRPO's KL weight: ``fieldmeta.method_default``) becomes the new method's; one the
    user set stays, and SFT (which has no beta) leaves it alone."""
    return gr.skip() if method == "sft" else _follow("beta", method, beta)


def wire(widgets: dict[str, gr.components.Component]) -> None:
    """Show each method's settings when the method changes (also when a settings file or a run fills
    the form); on the user's own choice, move a default learning rate along (``method_rate``)."""
    fields = list(method_visibility("sft"))
    method, rate = widgets["training_method"], widgets["learning_rate"]
    method.change(
        lambda chosen: [
            *(gr.update(visible=method_visibility(chosen)[name]) for name in fields),
            gr.update(visible=chosen == "grpo"),
        ],
        method,
        [*(widgets[name] for name in fields), widgets[LIBRARY]],
        queue=False,
        api_name=False,
        show_progress="hidden",
    )
    method.input(method_rate, [method, rate], rate, queue=False, api_name=False, show_progress="hidden")
    beta = widgets["beta"]
    method.input(method_beta, [method, beta], beta, queue=False, api_name=False, show_progress="hidden")
    widgets[LIBRARY].input(
        add_reward,
        [widgets[LIBRARY], widgets["rewards"]],
        [widgets["rewards"], widgets[LIBRARY]],
        queue=False,
        api_name=False,
        show_progress="hidden",
    )
