"""What differs by kind of model (a causal text LM, an image-and-text model, ...): the
``ModelKind`` interface each kind implements, and the one registry every layer asks which kind a
model is, from its ``config.json`` (never from its name).

A kind overrides only what differs; every method's default is the text LM's way, and a hook that
returns None (or False, 0, "") leaves its step to the shared layers (``data/``, ``models/``,
``training/``, ``serving/``, ``evaluation/``, ``export/``), which every kind uses. The kinds live in
``trainer_core.kinds``, one folder a kind, above the layers they use; this registry imports that
package by name the first time it is asked (as transformers' auto classes import a model's module
by name), so that any layer can ask here without importing a kind's code. ``docs/ARCHITECTURE.md``
says who calls each method.
"""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from typing import Any, Optional

BUILT_IN = "trainer_core.kinds"  # the package whose ``KINDS`` are the built-in kinds, most specific first


class ModelKind:
    """One kind of model. Attributes: ``name`` (stable id, carried in plans), ``label`` (words for
    people), ``media`` (what its rows carry besides text, e.g. ``("image",)``), ``suggestion`` (how
    a refusal of such rows names this kind's models) and ``auto_class`` (the transformers class that
    loads its weights). Defaults: the causal text LM. ``form_fields``: request fields that only
    this kind reads among a section's (e.g. ``language``, ``task`` for speech-to-text): the form shows
    a field some kind names here only while the chosen model is of a kind that names it."""

    name = "causal"
    label = "text"
    media: tuple[str, ...] = ()
    suggestion = ""
    auto_class = "AutoModelForCausalLM"
    form_fields: tuple[str, ...] = ()

    # Detect, from config.json; ``picker_note`` from the JSON alone (listing models imports no torch).
    def family(self, config: Any) -> Optional[str]:
        """The family's display name (e.g. "Qwen2-VL") when ``config`` (a ``PretrainedConfig`` or
        the config.json dict) is this kind's; None when it is not."""
        return None

    def claims_folder(self, folder: Path) -> bool:
        """True when the model saved in ``folder`` is this kind's whatever its config.json says
        (e.g. a sentence-transformers folder, whose config is its encoder's); asked before
        ``family``. From the folder's files alone (no torch)."""
        return False

    def claims_request(self, request: Any) -> bool:
        """True when ``request`` asks for this kind whatever its model is (e.g. ``is_embedding``:
        a causal LM trained as an embedder); asked before the model's folder."""
        return False

    def picker_note(self, config: dict) -> str:
        """What the model picker adds to a local model's label (e.g. " · vision (Qwen2-VL)"),
        from the config.json dict alone; "" for nothing."""
        return ""

    # Load.
    def model_class(self) -> Any:
        """The transformers auto class that loads this kind's weights (``auto_class``)."""
        import transformers

        return getattr(transformers, self.auto_class)

    def load_model(self, path: Path, request: Any, device: str) -> Any:
        """This kind's model of ``path`` trained as ``request`` asks, on ``device`` (e.g. a
        ``SentenceTransformer``); None: the text path (``models.loading.load_model``). Raises
        Refusal / ModelLoadError."""
        return None

    def inner_model(self, model: Any) -> Any:
        """The transformers model inside ``model`` as this kind loads it (its ``config``, its
        adapters: what ``run.json`` records); None: ``model`` is one."""
        return None

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        """The processor saved with the model in ``path`` (``kwargs``: ``from_pretrained``'s); None
        when the tokenizer alone reads the model's inputs (``models.loading.load_tokenizer``)."""
        return None

    # Data: the shapes the kind reads, and their refusals.
    def holds_media(self, dataset: Any) -> bool:
        """True when ``dataset`` (a ``datasets.Dataset`` of one source) holds this kind's media."""
        return False

    def keeps_media(self, request: Any, dataset: Any, kind: ModelKind) -> bool:
        """True when this source's media are kept for ``request``, whose model is of ``kind``
        (``media_rows`` then reads the source). Asked of every kind, so that a kind's own switches
        (``is_dataset_image``) are refused with a DatasetError for a model of another kind."""
        return False

    def media_rows(
        self, dataset: Any, fmt: Any, source: str, base: Optional[Path], first_row: int = 1
    ) -> tuple[Any, list[str]]:
        """(canonical rows with their media, reading notes) of one source; raises DatasetError
        naming ``source`` and the row. Only asked where ``holds_media`` or ``keeps_media`` is True."""
        raise NotImplementedError(f"{self.name} models read no media")

    def join_media(self, normalised: list[tuple], request: Any) -> list[tuple]:
        """The normalised (name, rows, format) sources of one split, made joinable (e.g. an empty
        media column where another source has media). Asked of every kind. Raises DatasetError."""
        return normalised

    def preview_rows(self, dataset: Any, request: Any, tokenizer: Any, source: str, base: Optional[Path] = None) -> Any:
        """The Train form's dataset preview of ``dataset`` (the first rows of the file ``source``, as
        read; ``base``: its folder, which relative clip paths are read from) where this kind reads
        its own columns, as its training reads them with ``request`` (the form's settings;
        ``tokenizer``: the model's, or None): a ``data.preview_cells.KindRows`` (what it found, the
        rows, each row's tokens; an ``audio`` column of clip references gets players); None: the
        text path's preview (chat turns, text, preference or prompt rows, media). Raises
        DatasetError or Refusal naming the row and column, or the setting, as its training would."""
        return None

    def prepare_data(self, request: Any, processor: Any) -> Any:
        """The ``data.prepared.PreparedData`` of ``request`` for this kind's ``processor``; None:
        the text path (``data.prepared.prepare_data``). Raises DatasetError."""
        return None

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        """(what the worker's data line adds, e.g. "; Qwen2-VL: 6 images, ...", the details it
        adds to the event) for prepared ``data``."""
        return "", {}

    # Train.
    def collator(self, processor: Any, request: Any) -> Any:
        """The collator that makes this kind's rows into padded batches with labels (B, T); None:
        the trainer's own batches of tokenized rows."""
        return None

    def lora_targets(self, model: Any, request: Any) -> Any:
        """``models.targets.Targets`` for ``request`` on ``model`` where the kind adds layers of its
        own (a vision tower); None: matched as for a text LM. Raises ``TargetError``."""
        return None

    # Train: what the monitor says while the trainer evaluates (``training.worker``'s progress callback).
    evaluating = "evaluating on the held-out rows"

    def build_trainer(
        self,
        request: Any,
        model: Any,
        data: Any,
        output_dir: Path,
        device: str,
        callbacks: list[Any],
        run_name: Optional[str] = None,
    ) -> Any:
        """The trainer of this kind's ``model`` on prepared ``data`` (a transformers ``Trainer``
        with ``save_final``, running ``callbacks`` and the studio's own: divergence guard, early
        stopping); None: the text path's trainer for ``request.training_method``. Raises Refusal."""
        return None

    def extra_parameters(self, config: Any) -> int:
        """Parameters outside the language model (a vision tower and projector) of ``config``."""
        return 0

    # Evaluate and serve.
    def evaluator(self, processor: Any) -> Any:
        """An object with ``prompt_length(row)``, ``loss(...)`` and ``answers(...)`` that evaluates
        this kind's rows one by one with ``processor``; None: the text path's batches."""
        return None

    def evaluation(self) -> Any:
        """This kind's own evaluation after training (the Evaluate tab, the CLI's ``evaluate``), run
        in the same worker as the text path's: an object with ``plan(plan, run_request) -> dict``
        (``evaluation.sources``' data plan completed with what the kind reads, its rows read once
        now; ``run_request``: the run's ``TrainingStartRequest`` or None; raises DatasetError) and
        ``run(request, context, progress, should_stop) -> EvaluationResult | None`` (None: stopped;
        ``evaluation.worker.evaluate``'s arguments). None: the text path (loss, answers, scores)."""
        return None

    def chat_inputs(self, processor: Any, messages: list[dict], device: str) -> Optional[dict]:
        """The model's inputs (``input_ids`` (1, T) and the kind's extras) for chat ``messages``
        plus the generation prompt, on ``device``; None: the text path (``serving.generate``).
        Raises ChatInputError."""
        return None

    # Serve: what the inference worker answers with this kind's models.
    serves = "chat"  # "chat" (POST /v1/chat/completions) or "embeddings" (POST /v1/embeddings)

    def load_server(self, choice: Any, models_dir: Path) -> Any:
        """In the inference worker: this kind's loaded ``choice`` (a ``serving.schemas.ModelChoice``
        whose ``serves`` is this kind's), an object with ``answer(request: dict) -> dict`` (the
        ``done`` event's payload) and ``device``, ``load_seconds``; None: the text path
        (``serving.loader.load_choice``). Raises ModelLoadError or ChatInputError."""
        return None

    # Export.
    gguf_projector = False  # its GGUF export writes a projector file too (``mmproj``, llama.cpp's --mmproj)

    def exporter(self, fmt: str) -> Any:
        """The function that makes export format ``fmt`` ("adapter", "merged", "gguf-f16", ...) of a
        run of this kind: ``(export.job.ExportJob) -> export.schemas.ExportResult``, raising what
        the text path's exporters raise; None: the text path (``export.worker.exporter``)."""
        return None

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        """Why llama.cpp's converter in ``converter`` cannot export this model to GGUF, or None."""
        return None

    # Export: a merged export's model card (``export.card``), where it differs from a text LM's.
    pipeline_tag = ""  # the Hub's task of this kind's models (e.g. "automatic-speech-recognition"); "": none written

    def card_usage(self, request: dict) -> Optional[list[str]]:
        """Python lines that load a merged export of this kind from ``PATH_TO_THIS_FOLDER`` and use
        it once (``request``: the run's request as recorded, e.g. its language); None: the text LM's."""
        return None

    def gguf_note(self, config: dict) -> Optional[str]:
        """The GGUF export's note where the file's answers cannot be compared with the model's
        (None: they are compared)."""
        return None

    # Check.
    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        """The whole pre-flight report (``preflight.report.PreflightReport``; its errors are what
        Start refuses on) of ``request`` for this kind's model in ``folder``, where the kind reads its
        data its own way (e.g. embedding pairs); ``tokenizer``: the preview tokenizer or None;
        ``started``: the check's ``time.perf_counter()``. None: the text path's check."""
        return None

    def estimates(self, request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
        """The memory and time estimates of a run of this kind whose check reads its rows its own
        way (``check_report``; the text path's are ``preflight.costs``'): the report's fields
        ``memory``, ``time``, their totals ``memory_estimate_gib`` / ``time_estimate_seconds``, or
        ``no_estimates`` saying why not, and a memory ``warning`` (an Issue) when over the free
        memory; for prepared ``data``, its ``plan`` (``preflight.steps.StepPlan``) and the model in
        ``folder``. {}: none (the report says so)."""
        return {}

    def check_line(self, request: Any, settings: Any, folder: Optional[Path]) -> Optional[str]:
        """The pre-flight check's line about the model in ``folder`` and its data; None: no line."""
        return None

    def media_tokens(self, folder: Optional[Path], rows: Any) -> Optional[list[int]]:
        """Tokens the media of each of ``rows`` (the check's canonical rows, a ``datasets.Dataset``)
        add to its text tokens in the model saved in ``folder`` (e.g. an audio clip's audio tokens),
        so the check's token counts and estimates hold them; None: the rows' text is all."""
        return None


_lock = threading.Lock()
_kinds: list[ModelKind] = []
_added: list[ModelKind] = []  # registered kinds, newest first


def kinds() -> tuple[ModelKind, ...]:
    """Every kind, most specific first: the registered ones (newest first), then the built-in
    kinds, the causal text LM last (the fallback)."""
    with _lock:
        if not _kinds:
            _kinds.extend(importlib.import_module(BUILT_IN).KINDS)
        return (*_added, *_kinds)


def register(kind: ModelKind) -> ModelKind:
    """Add ``kind`` ahead of every other kind (it is asked first) and return it."""
    with _lock:
        _added.insert(0, kind)
    return kind


def unregister(kind: ModelKind) -> None:
    """Take a registered ``kind`` out again (a test's toy kind); raises ValueError if not there."""
    with _lock:
        _added.remove(kind)


def kind_of(config: Any) -> ModelKind:
    """The kind of ``config`` (a ``PretrainedConfig`` or the config.json dict; None: the fallback)."""
    every = kinds()
    if config is None:
        return every[-1]
    return next((kind for kind in every if kind.family(config) is not None), every[-1])


def folder_config(folder: Optional[Path]) -> Optional[dict]:
    """The config.json dict of the model saved in ``folder``; None for None, a folder without a
    readable config, or one that is not a JSON object."""
    if folder is None:
        return None
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def adapter_base_config(folder: Path) -> Optional[dict]:
    """The config.json dict of the base model of the LoRA adapter saved in ``folder`` (its
    ``adapter_config.json``'s ``base_model_name_or_path``: a local folder, or a Hub id in the local
    Hub cache); None for a folder without an adapter or a base not on this machine. Files only."""
    if (folder / "config.json").is_file():
        return None  # a whole model: its own config says
    try:
        base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(base, str) or not base:
        return None
    local = Path(base).expanduser()
    if local.is_absolute() or base.startswith("."):
        return folder_config(local) if local.is_dir() else None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(base, "config.json")
    return folder_config(Path(cached).parent) if isinstance(cached, str) else None


def kind_for_folder(folder: Optional[Path]) -> ModelKind:
    """The kind of the model saved in ``folder``: the first kind that claims the folder
    (``ModelKind.claims_folder``), else by its config (the fallback where it cannot be read)."""
    if folder is not None:
        claimed = next((kind for kind in kinds() if kind.claims_folder(Path(folder))), None)
        if claimed is not None:
            return claimed
    return kind_of(folder_config(folder))


def kind_for_request(request: Any, folder: Optional[Path]) -> ModelKind:
    """The kind a training ``request`` trains its model (saved in ``folder``) as: the first kind
    that claims the request (``ModelKind.claims_request``), else ``kind_for_folder``."""
    claimed = next((kind for kind in kinds() if kind.claims_request(request)), None)
    return claimed if claimed is not None else kind_for_folder(folder)


def kind_named(name: Optional[str]) -> ModelKind:
    """The kind whose ``name`` is ``name`` (as a plan carries it); the fallback for None or an
    unknown name."""
    every = kinds()
    return next((kind for kind in every if kind.name == name), every[-1])


def media_keeper(request: Any, dataset: Any, kind: ModelKind) -> Optional[ModelKind]:
    """The kind that keeps this source's media for ``request`` (its model of ``kind``), or None:
    read as text. Every kind is asked (``ModelKind.keeps_media``); raises DatasetError as it does."""
    return next((other for other in kinds() if other.keeps_media(request, dataset, kind)), None)


def joined_media(normalised: list[tuple], request: Any) -> list[tuple]:
    """``normalised`` passed through every kind's ``join_media``. Raises DatasetError."""
    for kind in kinds():
        normalised = kind.join_media(normalised, request)
    return normalised


def picker_note(config: dict, folder: Optional[Path] = None) -> str:
    """The model picker's note for a config.json dict (of the model in ``folder``): the note of the
    kind that claims the folder (``ModelKind.claims_folder``; " · <its name>" where it has none),
    else the first kind's that has one, else ""."""
    if folder is not None:
        claimed = next((kind for kind in kinds() if kind.claims_folder(Path(folder))), None)
        if claimed is not None:
            return claimed.picker_note(config) or f" · {claimed.name}"
    return next((note for note in (kind.picker_note(config) for kind in kinds()) if note), "")


def serving_kind(serves: str) -> ModelKind:
    """The kind that serves ``serves`` ("chat", "embeddings": ``ModelChoice.serves``): the first
    kind whose ``serves`` it is; the fallback (the text path) for anything else."""
    every = kinds()
    return next((kind for kind in every if kind.serves == serves), every[-1])


def media_kind(dataset: Any) -> Optional[ModelKind]:
    """The kind whose media ``dataset`` holds (its rows need that kind of model), or None."""
    return next((kind for kind in kinds() if kind.holds_media(dataset)), None)


def reader_of(media: str) -> Optional[ModelKind]:
    """The kind whose rows carry ``media`` ("image", "audio", ...), or None when none does."""
    return next((kind for kind in kinds() if media in kind.media), None)


def readers_of(media: str) -> tuple[ModelKind, ...]:
    """Every kind whose rows carry ``media`` ("image", "audio", ...), most specific first; () when
    none does (e.g. audio: speech-to-text and audio chat models)."""
    return tuple(kind for kind in kinds() if media in kind.media)


def own_fields() -> frozenset[str]:
    """The request fields some kind names in ``form_fields`` (read by that kind alone)."""
    return frozenset(name for kind in kinds() for name in kind.form_fields)


def way_out(media: str) -> str:
    """How a refusal of rows with ``media`` names the models to pick instead, from the readers' own
    ``suggestion``s: "choose a speech-to-text model (e.g. ...), or an audio chat model (e.g. ...)";
    "<media> is not trained here" when no kind reads it."""
    suggestions = list(dict.fromkeys(kind.suggestion or kind.label for kind in readers_of(media)))
    return f"choose {', or '.join(suggestions)}" if suggestions else f"{media} is not trained here"
