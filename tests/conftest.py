"""Shared fixtures: the real SmolLM2 tokenizer/model (materialized once), the shared datasets and a
real trained LoRA run (``trained_run``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

from trainer_core.settings import get_settings

if TYPE_CHECKING:
    from trainer_core.settings import Settings


def _share_the_cores() -> None:
    """Under pytest-xdist, N test processes share the machine: each of them, and every process it
    starts (training and chat workers, apps, CLI runs), gets ``cores // N`` torch threads
    (``OMP_NUM_THREADS``, unless set). More threads than cores only spin: OpenMP's waiting threads
    burn the cycles the other process needs."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


_share_the_cores()
# The token cache writes under the data dir (``studio_data/`` of the working directory by default):
# off for the tests; those of the cache, and the launched apps with a data dir of their own, turn it on.
os.environ.setdefault("STUDIO_TOKEN_CACHE_MB", "0")
REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
# Fixtures shared by several test modules (the page's app and browser; the chat studio over a fake
# engine; the launched app of the HTTP tests), and the lanes' time summary.
pytest_plugins = [
    "tests.support.page_tools",
    "tests.support.chat_server",
    "tests.support.api_server",
    "tests.support.lanes",
]


LANE_FIXTURES = {"real_model": {"model_dir"}, "browser": {"browser", "page"}}
# Session fixtures that are costly to build twice: the tests that use one share a pytest-xdist
# group, so one test process builds it (the real trained run: about 25 s; the in-process app; the
# launched app of the HTTP tests: about 20 s).
SHARED_GROUPS = {"trained_run": "real-trained-run", "app_server": "session-app", "api_app": "api-app"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it needs, directly or through others: ``real_model`` with
    ``model_dir`` (the real SmolLM2), ``browser`` with Playwright's ``browser`` or ``page``. The
    quick lane, ``-m "not slow and not real_model and not browser"``, then cannot keep a real-model
    or browser test by oversight (``slow`` is marked by hand, on tests that start processes).

    And give each test its pytest-xdist group (``--dist loadgroup`` runs a group in one process):
    the group of the costly session fixture it uses (``SHARED_GROUPS``), else its file when it uses
    a module- or class-scoped fixture (an app, a browser: built once, and tests that share one app
    never run at once); any other test goes to whichever process is free. ``tryfirst``: pytest-xdist's
    own hook reads the ``xdist_group`` marks into the node ids, so they must be on before it runs
    (after it, every group but the ones marked in the test files was ignored, and each test process
    built the apps and the trained run again)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, needs in LANE_FIXTURES.items():
            if needs & fixtures:
                item.add_marker(marker)
    _longest_first(items)
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("xdist_group") is not None:
            continue
        shared = [group for fixture, group in SHARED_GROUPS.items() if fixture in fixtures]
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))
        elif _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _longest_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place, files kept whole and in their order within each class: first the
    files of tests that declare a longer limit than the default (``pytest.mark.timeout``; the
    longest limit first), then files with a ``real_model`` test, then files with a ``browser`` or
    ``slow`` test, then the rest; so that pytest-xdist hands out the long work first and no
    process is left running one long test at the end. ``--dist loadgroup`` keeps this order for the
    tests that share no xdist group; the groups (``SHARED_GROUPS``, a file's module fixture) it hands
    out before them, the group with the most tests first (xdist's ``--loadscope-reorder``), so a
    long test's place in the run is set here only when it is in no group."""

    def weight(item: pytest.Item) -> float:
        limit = item.get_closest_marker("timeout")
        if limit is not None and limit.args and limit.args[0] > 300:
            return -float(limit.args[0])
        if item.get_closest_marker("real_model"):
            return 0
        return 1 if item.get_closest_marker("browser") or item.get_closest_marker("slow") else 2

    files: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        files[path] = min(files.get(path, 2), weight(item))
    first_seen = {path: index for index, path in enumerate(files)}
    items.sort(key=lambda item: (files[item.nodeid.split("::")[0]], first_seen[item.nodeid.split("::")[0]]))


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether a fixture in the test's closure lives longer than the test but not the session."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(str(d.scope) in ("module", "class", "package") for defs in definitions for d in defs)


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """Folder of the real SmolLM2-135M-Instruct model (built from the bundled GGUF on first use)."""
    from trainer_core.models.loading import materialize_default_model

    return materialize_default_model(get_settings().models_dir)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random SmolLM2 (``tests/support/tiny_model.py``: hidden 64, 2 layers, the real tokenizer and
    chat template), built once per test process (about 1 s) in a folder of its own: allow
    ``tiny_model_dir.parent`` where a test's settings confine model paths. Its outputs are noise.
    (It reads the real model's folder without the ``model_dir`` fixture, which marks a test
    ``real_model``.)"""
    from tests.support.tiny_model import build_tiny_model
    from trainer_core.models.loading import materialize_default_model

    real = materialize_default_model(get_settings().models_dir)
    return build_tiny_model(real, tmp_path_factory.mktemp("tiny-models") / "SmolLM2-tiny")


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory, tiny_model_dir: Path) -> Path:
    """A tiny random Qwen2-VL (``bench/vision_model.py``: hidden 64, 2 layers, a 3-block vision
    tower, the SmolLM2 tokenizer plus Qwen2-VL's vision tokens and template), built once per test
    process (about 1 s) in a folder of its own: allow ``tiny_vl_dir.parent``. Its outputs are noise."""
    from bench.vision_model import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(tiny_model_dir, tmp_path_factory.mktemp("tiny-vl") / "Qwen2-VL-tiny")


@pytest.fixture(scope="session")
def tiny_audio_chat_dir(tmp_path_factory, tiny_model_dir: Path) -> Path:
    """A tiny random Qwen2-Audio (``bench/audio_chat_model.py``: hidden 64, 3 layers in the audio
    encoder and the language model, a Whisper feature extractor, the SmolLM2 tokenizer plus
    Qwen2-Audio's audio tokens and template), built once per test process (about 2 s) in a folder
    of its own: allow ``tiny_audio_chat_dir.parent``. Its outputs are noise."""
    from bench.audio_chat_model import build_tiny_qwen2_audio

    return build_tiny_qwen2_audio(tiny_model_dir, tmp_path_factory.mktemp("tiny-audio-chat") / "Qwen2-Audio-tiny")


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A tiny random BERT-style sentence-transformers model (``bench/embedding_model.py``: hidden
    64, 2 layers, a WordPiece tokenizer trained offline, mean pooling, normalize), built once per
    test process (a few seconds) in a folder of its own: allow ``tiny_encoder_dir.parent``."""
    from bench.embedding_model import build_tiny_encoder

    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder") / "bert-tiny-embedder")


@pytest.fixture(scope="session")
def tiny_embedder_dir(tmp_path_factory, tiny_model_dir: Path) -> Path:
    """The tiny SmolLM2 as a decoder embedder (``bench/embedding_model.py``: last-token pooling,
    left padding, normalize), as Qwen3-Embedding is built; allow ``tiny_embedder_dir.parent``."""
    from bench.embedding_model import build_decoder_embedder

    return build_decoder_embedder(tiny_model_dir, tmp_path_factory.mktemp("tiny-embedder") / "SmolLM2-tiny-embedder")


@pytest.fixture(scope="session")
def tiny_whisper_dir(tmp_path_factory) -> Path:
    """A tiny random Whisper (``bench/whisper_model.py``: d_model 64, 2 + 2 layers, 80 mel bins, a
    byte-level BPE trained offline with Whisper's special tokens, ``WhisperProcessor``), built once
    per test process (a few seconds) in a folder of its own: allow ``tiny_whisper_dir.parent``."""
    from bench.whisper_model import build_tiny_whisper

    return build_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper") / "whisper-tiny-random")


@pytest.fixture(scope="session")
def tiny_csm_dir(tmp_path_factory) -> Path:
    """A tiny random Sesame CSM (``bench/csm_model.py``: backbone hidden 64, 2 layers, a 2-layer depth
    decoder, a tiny Mimi codec with 4 codebooks, a byte-level BPE trained offline with CSM's special
    tokens, ``CsmProcessor``), built once per test process (a few seconds) in a folder of its own:
    allow ``tiny_csm_dir.parent``."""
    from bench.csm_model import build_tiny_csm

    return build_tiny_csm(tmp_path_factory.mktemp("tiny-csm") / "csm-tiny-random")


@pytest.fixture(scope="session")
def tiny_orpheus_dir(tmp_path_factory, tiny_model_dir: Path) -> Path:
    """A tiny random Orpheus-style Llama (``bench/orpheus_model.py``: hidden 64, 2 layers, the real
    tokenizer plus Orpheus' 28,682 ``<custom_token_N>`` tokens) beside a tiny random SNAC codec of SNAC
    24 kHz's layout (``tiny_snac_dir``), built once per test process (a few seconds): allow
    ``tiny_orpheus_dir.parent``."""
    from bench.orpheus_model import build_tiny_orpheus, build_tiny_snac

    folder = tmp_path_factory.mktemp("tiny-orpheus")
    build_tiny_snac(folder / "snac-tiny")
    return build_tiny_orpheus(tiny_model_dir, folder / "orpheus-tiny")


@pytest.fixture(scope="session")
def tiny_snac_dir(tiny_orpheus_dir: Path) -> Path:
    """The tiny SNAC codec beside ``tiny_orpheus_dir`` (config.json, pytorch_model.bin)."""
    return tiny_orpheus_dir.parent / "snac-tiny"


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path):
    """The real SmolLM2 tokenizer (ChatML template, eos/pad = <|im_end|>), read from the tiny
    model's folder (the same files), so a test that needs only the tokenizer is not ``real_model``."""
    from trainer_core.models.loading import load_tokenizer

    return load_tokenizer(tiny_model_dir)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """``../shared/datasets`` beside the repo."""
    assert DATASETS.is_dir(), f"{DATASETS} is missing: CI lays ../shared beside the clone"
    return DATASETS


class TrainedRun(NamedTuple):
    """A finished real LoRA run, made once per session (see ``trained_run``)."""

    settings: Settings  # data_dir (a temp folder holding the runs and studio.db), allowed_paths = the datasets
    db_path: Path  # its run history (RunStore(db_path) opens it; WAL, so several connections are fine)
    job_id: str  # the run's id: a chat model id; its checkpoints are f"{job_id}/checkpoint-{1,2,3}"
    output_dir: Path  # <data_dir>/runs/<job_id>: adapter_model.safetensors, tokenizer, checkpoint-1..3


TRAINED_RUN_REQUEST = dict(
    training_type="lora",
    max_steps=3,
    save_steps=1,
    batch_size=2,
    max_seq_length=128,
    dataset_slice_end=16,
    learning_rate=1e-3,
)


TINY_LEARNING_RATE = 1e-2  # a random 3.2 M-parameter model: 1e-3 for 3 steps leaves its greedy answers as they were


def train_to_completion(runs_dir: Path, db_path: Path, request) -> tuple:
    """Train ``request`` with the real worker through a ``JobRunner`` over a ``RunStore`` at
    ``db_path`` (runs under ``runs_dir``), wait for the end (at most 10 minutes) and assert it
    completed. Returns (the final ``TrainingStatus``, the run's job id, its output folder); the
    store is closed."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.vocabulary import Phase

    store = RunStore(db_path)
    runner = JobRunner(runs_dir=runs_dir, store=store, warm_modules=())
    response = runner.start(request)
    assert response.status == "queued", response
    assert runner.wait(600), "the run did not end within 10 minutes"
    status = runner.status()
    assert status.phase == Phase.completed, (status.message, status.error)
    store.close()
    return status, response.job_id, Path(status.details["output_dir"])


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, model_dir, datasets_dir) -> Iterator[TrainedRun]:
    """A LoRA run of the real SmolLM2-135M-Instruct (``model_name`` = the local ``model_dir``), trained
    for 3 steps on the first 16 rows of ``identity.json`` (batch_size 2, max_seq_length 128,
    learning_rate 1e-3: enough for its greedy answers to differ from the base model's), with a
    checkpoint at every step, through the real ``JobRunner`` + ``RunStore`` (~20 s on 2 CPU cores).

    Yields ``TrainedRun(settings, db_path, job_id, output_dir)`` (a NamedTuple; unpacks as four).
    Build an engine or an app over it with ``settings`` (``Settings(data_dir=..., allowed_paths=...)``)
    and ``RunStore(db_path)``. Treat it as read-only: it is shared by every test of the session
    (copy ``output_dir`` elsewhere to damage it)."""
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("trained"), allowed_paths=str(datasets_dir))
    request = TrainingStartRequest(
        model_name=str(model_dir), local_datasets=[str(datasets_dir / "identity.json")], **TRAINED_RUN_REQUEST
    )
    _, job_id, output_dir = train_to_completion(settings.runs_dir, settings.db_path, request)
    yield TrainedRun(settings, settings.db_path, job_id, output_dir)


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory, tiny_model_dir, datasets_dir) -> Iterator[TrainedRun]:
    """``trained_run``'s twin on the tiny model (``TRAINED_RUN_REQUEST``: 3 LoRA steps on 16 rows of
    identity.json, a checkpoint at every step, but at ``TINY_LEARNING_RATE``, so that its answers and
    its loss on identity.json differ from the base's; about 10 s, the worker's start-up): for tests of what
    the studio does with a run's files (choices, export and evaluation plumbing, resume, share links),
    where what the model says does not matter. ``settings.allowed_paths`` holds the datasets and the
    tiny model's folder. Read-only, like ``trained_run``."""
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("tiny-trained"),
        allowed_paths=os.pathsep.join([str(datasets_dir), str(tiny_model_dir.parent)]),
    )
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        **{**TRAINED_RUN_REQUEST, "learning_rate": TINY_LEARNING_RATE},
    )
    _, job_id, output_dir = train_to_completion(settings.runs_dir, settings.db_path, request)
    yield TrainedRun(settings, settings.db_path, job_id, output_dir)
