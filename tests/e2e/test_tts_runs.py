"""CSM runs through the doors users drive (the real worker processes): through the API, the tiny
CSM trained 3 LoRA steps on the shared clips with their speaker numbers (the adapters of the
backbone and the depth decoder both change), then the run speaks to the ``openai`` client through
``POST /v1/audio/speech`` (a wav whose duration is the model's own samples / rate; flac too), behind
the token (401 without it) and through a share link, refusing a voice that is no speaker id;
through the CLI, the request a YAML config's speaker column makes (admitted, and refused for a
column the data lacks); an Orpheus-style run (SNAC codes) trained through the API and speaking."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.conftest import AUTH, TOKEN, ServerThread, allowed
from tests.support.chat_server import api_app
from tests.support.train_api import start_job, wait_end
from tests.support.tts_data import tts_file

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SAY = "Hello there."


def _speech_app(tmp_path: Path, data: Path, models: Path):
    """(the API app over a runner and chat engine of their own, the engine): runs in
    ``tmp_path / "data"``, the data's and the model's folders allowed, behind ``TOKEN``."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", allowed_paths=allowed(data.parent, models), api_token=TOKEN)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    engine = ChatEngine(runner, settings)
    return api_app(settings, runner, engine), engine


def _trained(api: httpx.Client, body: dict, line: str) -> tuple[str, Path]:
    """(job id, run folder) of ``body`` checked (no errors, the kind's line starting with ``line``)
    and trained to its end, 3 steps."""
    checked = api.post("/api/train/preflight", json=body)
    assert checked.status_code == 200 and checked.json()["errors"] == [], checked.text
    assert checked.json()["vision"].startswith(line), checked.json()["vision"]
    job = start_job(api, body)
    ended = wait_end(api)
    assert ended["phase"] == "completed", ended["error"]
    assert ended["metric_history"]["steps"] == [1, 2, 3]
    return job, Path(ended["details"]["output_dir"])


def _changed_adapters(run_dir: Path) -> set[str]:
    """The stacks ("backbone_model", "depth_decoder") whose LoRA B weights left PEFT's zeros."""
    from safetensors.torch import load_file

    weights = load_file(str(run_dir / "adapter_model.safetensors"))
    found = {name for name, value in weights.items() if "lora_B" in name and value.abs().sum() > 0}
    return {stack for stack in ("backbone_model", "depth_decoder") if any(f".{stack}." in n for n in found)}


def _own_samples(run_dir: Path, base: Path, job: str) -> int:
    """Samples the run's own ``speak`` says for ``SAY`` in voice 1 (in this process)."""
    from trainer_core.kinds.text_to_speech.serve import load_tts_model, speak
    from trainer_core.serving.schemas import ModelChoice

    choice = ModelChoice(id=job, label=job, kind="final", base_model=str(base), path=str(run_dir), adapter=True)
    model, processor = load_tts_model(choice, run_dir, "cpu")
    return len(speak(model, processor, SAY, 1)[0])


@pytest.mark.timeout(600)
def test_a_csm_run_trains_through_the_api_and_speaks_to_the_openai_client(tmp_path, tiny_csm_dir):
    import soundfile

    data = tts_file(tmp_path / "clips")
    app, engine = _speech_app(tmp_path, data, tiny_csm_dir.parent)
    body = {
        "model_name": str(tiny_csm_dir),
        "local_datasets": [str(data)],
        "batch_size": 2,
        "max_seq_length": 512,
        "max_steps": 3,
        "learning_rate": 1e-3,
        "mixed_precision": "no",
    }
    with ServerThread(app) as server:
        url = server.url.rstrip("/")
        api = httpx.Client(base_url=url, headers=AUTH, timeout=120)
        job, run_dir = _trained(api, body, "Text-to-speech (CSM): 2 clips, ")
        assert _changed_adapters(run_dir) == {"backbone_model", "depth_decoder"}
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
        assert {m.id: m.serves for m in client.models.list()} == {"base": "speech", job: "speech"}
        wav = client.audio.speech.create(model=job, voice="1", input=SAY, response_format="wav").content
        info = soundfile.info(io.BytesIO(wav))
        own = _own_samples(run_dir, tiny_csm_dir, job)
        assert (info.samplerate, info.channels, info.frames) == (24000, 1, own) and own > 0
        assert info.duration == pytest.approx(own / 24000)
        flac = client.audio.speech.create(model=job, voice="1", input=SAY, response_format="flac").content
        assert soundfile.info(io.BytesIO(flac)).frames == own and flac[:4] == b"fLaC"
        speech = {"model": job, "input": SAY, "voice": "1"}
        assert httpx.post(f"{url}/v1/audio/speech", json=speech, timeout=60).status_code == 401
        voice = api.post("/v1/audio/speech", json={**speech, "voice": "alloy"})
        assert voice.status_code == 400 and voice.json()["error"]["param"] == "voice"
        made = api.post("/api/train/share", json={"model": job})
        assert made.status_code == 201, made.text
        shared = openai.OpenAI(base_url=url + made.json()["api_base_path"], api_key="unused", max_retries=0)
        assert shared.audio.speech.create(model=job, voice="1", input=SAY, response_format="wav").content == wav
        engine.unload()
    assert {"adapter_config.json", "processor_config.json", "chat_template.jinja"} <= {
        p.name for p in run_dir.iterdir()
    }


def _own_frames(run_dir: Path, base: Path, job: str) -> int:
    """Frames the Orpheus run's own ``speak`` says for ``SAY`` as speaker "tara" (in this process)."""
    from trainer_core.kinds.orpheus.serve import OrpheusServer
    from trainer_core.serving.schemas import ModelChoice

    choice = ModelChoice(id=job, label=job, kind="final", base_model=str(base), path=str(run_dir), adapter=True)
    return OrpheusServer(choice, run_dir, "cpu").answer({"input": SAY, "voice": "tara"})["frames"]


@pytest.mark.timeout(600)
def test_an_orpheus_run_trains_through_the_api_and_speaks_snac_codes(tmp_path, tiny_orpheus_dir, tiny_snac_dir):
    """An Orpheus-style run (the tiny Llama with Orpheus' tokens, the tiny SNAC named in
    ``audio_codec``): checked, 3 LoRA steps on the shared clips with named speakers, then its speech
    through ``POST /v1/audio/speech``: a 24 kHz wav of the frames its own ``speak`` says, 2048 samples
    (SNAC's hop 512 x 4) a frame; the codec's name travels in the run's tokenizer."""
    import soundfile

    data = tts_file(tmp_path / "clips", speakers=("tara", "leo"))
    app, engine = _speech_app(tmp_path, data, tiny_orpheus_dir.parent)
    body = {
        "model_name": str(tiny_orpheus_dir),
        "local_datasets": [str(data)],
        "audio_codec": str(tiny_snac_dir),
        "batch_size": 2,
        "max_seq_length": 1024,
        "max_steps": 3,
        "learning_rate": 1e-3,
        "mixed_precision": "no",
    }
    with ServerThread(app) as server:
        url = server.url.rstrip("/")
        api = httpx.Client(base_url=url, headers=AUTH, timeout=120)
        job, run_dir = _trained(api, body, f"Text-to-speech (Orpheus, SNAC {tiny_snac_dir}): 2 clips, ")
        assert json.loads((run_dir / "tokenizer_config.json").read_text())["audio_codec"] == str(tiny_snac_dir)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
        assert {m.id: m.serves for m in client.models.list()} == {"base": "speech", job: "speech"}
        wav = client.audio.speech.create(model=job, voice="tara", input=SAY, response_format="wav").content
        engine.unload()
    info = soundfile.info(io.BytesIO(wav))
    frames = _own_frames(run_dir, tiny_orpheus_dir, job)
    assert (info.samplerate, info.channels, info.frames) == (24000, 1, frames * 2048) and frames > 0
    assert info.duration == pytest.approx(frames * 2048 / 24000)


def test_the_cli_admits_csm_with_the_speaker_column_from_yaml(tmp_path, tiny_csm_dir):
    """The CLI's ``train`` up to the start (its parser, the YAML config under the flags, then the
    admission every door runs: the rows and clips read and checked in the check's worker process,
    the speakers read from the YAML's ``speaker_column``): the request it would hand the
    ``JobRunner`` is a CSM run with that column, and a column the data lacks is refused (exit code
    1). What the runner does with such a request is the API test's above (the same
    ``JobRunner.start``); the CLI's own start, follow and exit code on a real worker run are
    ``test_cli.py``'s (text) and ``test_audio_chat_cli.py``'s (an audio kind)."""
    from trainer_core.cli.main import build_parser
    from trainer_core.cli.train import checked_args
    from trainer_core.model_kind import kind_for_folder

    data = tts_file(tmp_path / "clips")
    rows = json.loads(data.read_text())
    data.write_text(json.dumps([{**row, "voice": row.pop("speaker")} for row in rows]))
    out = tmp_path / "csm-run"

    def admitted(column: str):
        config = tmp_path / f"{column}.yaml"
        config.write_text(f"batch_size: 2\nmax_seq_length: 512\nspeaker_column: {column}\nmax_audio_seconds: 10\n")
        flags = ["--model-name", str(tiny_csm_dir), "--dataset", str(data), "--config", str(config)]
        return checked_args(build_parser().parse_args(["train", *flags, "--max-steps", "3", "--output-dir", str(out)]))

    request = admitted("voice")
    assert not isinstance(request, int), f"the CLI refused it (exit code {request})"
    assert kind_for_folder(Path(request.model_name)).name == "text_to_speech"
    assert (request.speaker_column, request.max_audio_seconds, request.batch_size, request.max_steps) == (
        "voice",
        10,
        2,
        3,
    )
    assert admitted("talker") == 1  # a column the rows lack
