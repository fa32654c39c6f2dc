"""The training form's sections, once: every request field names its section (``group`` in its
``json_schema_extra``), and the form's headings, the refusal notice, YAML files' comments and the
CLI's ``--help`` groups read the titles here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """``title``: the section's name in files and help (a YAML comment ``# --- Data ---``, a CLI
    ``--help`` group); ``form``: the heading of the form's block that holds its settings (the
    model's and the data's main fields stand above their *options*)."""

    title: str
    form: str


# Key (a field's ``group``) -> Section, in the form's order.
SECTIONS: dict[str, Section] = {
    "model": Section("Model", "Model options"),
    "method": Section("Training method", "Training method"),
    "data": Section("Data", "Data options"),
    "embedding": Section("Embedding", "Embedding options"),
    "audio": Section("Audio", "Audio options"),
    "training": Section("Hyperparameters", "Hyperparameters"),
    "lora": Section("LoRA", "LoRA"),
    "output": Section("Output", "Output"),
    "distributed": Section("Devices and processes", "Devices and processes"),
}
