"""Speech and audio training speed: our path against a bare script, for each audio kind.

    python -m bench.speech [whisper|audio_chat|tts|all] [--steps 40] [--pairs 2] [--threads 1]
                           [--model DIR] [--quick]

Both sides train the same model with its processor on the same clips and settings: LoRA r16 /
alpha 32 / dropout 0 on the same linear layers, batch 2, learning rate 1e-4 constant, fp32, no
activation checkpointing, seed 42, ``--steps`` optimizer steps.

- whisper: the tiny random Whisper of ``bench.whisper_model`` (or ``--model``) on the four demo
  clips (mp3 / wav / flac, 16-48 kHz, 2.9-5.9 s) with their transcripts
  (``bench.whisper_model.speech_file``), English, transcribe. Ours: the worker's own loading and
  data (``training.worker._load``: the kind's processor, model and ``prepare_speech_data``) and the
  kind's trainer (``SPEECH_TO_TEXT.build_trainer``: ``Seq2SeqTrainer`` over ``SpeechCollator``).
  Bare: as transformers' Whisper fine-tuning guide writes it: ``WhisperProcessor``, the clips decoded
  and resampled to 16 kHz (soundfile + soxr: ``datasets.Audio`` needs torchcodec, not installed) and
  made into log-mel features and label ids in ``Dataset.map`` before training, the guide's
  ``DataCollatorSpeechSeq2SeqWithPadding``, ``Seq2SeqTrainer``, PEFT's ``get_peft_model`` on
  q/k/v/out_proj, fc1, fc2 (both stacks). One change from the guide: the decoder prompt's tokens
  (language, task, no timestamps) are not scored, as ours, so that the two losses compare.
- audio_chat: the tiny random Qwen2-Audio of ``bench.audio_chat_model`` (or ``--model``) on
  ``mllm_audio_demo.json`` (3 conversations, one clip each). Ours: the worker's loading and data
  (``kinds.audio_chat.prepare``) and ``training.trainer.build_trainer`` with the kind's collator
  (answers only scored, audio tokens never). Bare: TRL's ``SFTTrainer`` with a collator of the
  processor's own (``apply_chat_template`` over an audio part per ``<audio>`` marker, then
  ``processor(text=, audio=)``; labels every token but padding and audio tokens), as TRL's
  multimodal recipes write it; LoRA on the language model's seven projections. The losses differ
  by design (ours scores the answers only); each side's tokens per step show the work is the same.
- tts: the tiny random CSM of ``bench.csm_model`` (or ``--model``) on its two clips with speakers
  (``bench.csm_model.tts_file``). Ours: the worker's loading and data (``prepare_tts_data``) and the
  kind's trainer (``TEXT_TO_SPEECH.build_trainer``: ``Trainer`` over ``TtsCollator``, the codec
  frozen). Bare: as transformers' CSM docs write training: ``CsmForConditionalGeneration``, each row
  a one-turn conversation of its speaker (text and clip, decoded as it is used), batches by
  ``processor.apply_chat_template(..., output_labels=True)``, ``Trainer``; LoRA on the backbone's and
  the depth decoder's block projections, as ours. Both score the same frames: the losses compare.

The bare scripts and the settings both sides share: ``bench.speech_bare``. Runs alternate A B A B,
each in a fresh process (``bench.ab``): samples / s of ``train()``, the median step after the first
(wall and CPU time), the mean loss. ``--quick`` (2 steps, one pair) runs both sides in this process:
a smoke run, no timing to read. Prints one JSON line, then a human summary per kind.
"""

from __future__ import annotations

import argparse
import json
import queue
import tempfile
from pathlib import Path
from typing import Any, Optional

from bench.ab import LossLog, spawn, summary, timed_train
from bench.speech_bare import BARE, MAX_LENGTH, SETTINGS

REPO = Path(__file__).resolve().parents[1]
AUDIO_CHAT_DATA = REPO.parent / "shared" / "datasets" / "mllm_audio_demo.json"
KINDS = ("whisper", "audio_chat", "tts")


def request_for(kind: str, model_dir: str, data: Path, steps: int) -> Any:
    """The ``TrainingStartRequest`` of ``kind``'s run (``SETTINGS``; Whisper: English, transcribe)."""
    from trainer_core.schemas import TrainingStartRequest

    extra = {"language": "en", "task": "transcribe"} if kind == "whisper" else {}
    return TrainingStartRequest(
        model_name=model_dir,
        local_datasets=[str(data)],
        max_steps=steps,
        max_seq_length=MAX_LENGTH[kind],
        **SETTINGS,
        **extra,
    )


def _ours(kind: str, model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
    """Our trainer, built as the worker builds it (``worker._load``, then the kind's builder)."""
    from trainer_core.training.trainer import build_trainer
    from trainer_core.training.worker import _load

    request = request_for(kind, model_dir, data, steps)
    model, processor, prepared, device, found = _load(request, queue.Queue())
    trainer = found.build_trainer(request, model, prepared, out, device, [callback])
    if trainer is None:  # the audio chat kind trains through the SFT builder with its collator
        trainer = build_trainer(request, model, processor, prepared.train, None, out, device, [callback])
    return trainer


def side(kind: str, which: str, model_dir: str, steps: int) -> dict[str, Any]:
    """One timed run of ``kind`` by ``which`` ("ours" | "bare"): ``ab.timed_train``'s figures and the
    tokens a step (audio chat: the processor's ``input_ids`` but padding; Whisper, TTS: not counted)."""
    import torch

    torch.manual_seed(SETTINGS["random_seed"])
    losses: list[float] = []
    ends: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        data = kind_data(kind, Path(scratch) / "data")
        bare = BARE[kind]
        callback = LossLog.make(losses, ends)
        out = Path(scratch) / "run"
        trainer = (
            _ours(kind, model_dir, data, steps, out, callback)
            if which == "ours"
            else bare(model_dir, data, steps, out, callback)
        )
        found = timed_train(trainer, steps, SETTINGS["batch_size"], losses, ends)
        seen = trainer.state.num_input_tokens_seen
    return {"kind": kind, "side": which, **found, "tokens_per_step": round(seen / steps, 1) if seen else None}


def kind_data(kind: str, folder: Path) -> Path:
    """The data file of ``kind``'s runs: the four demo clips with transcripts (whisper), the two with
    speakers (tts), both written into ``folder`` as a user brings them; ``mllm_audio_demo.json``."""
    if kind == "whisper":
        from bench.whisper_model import speech_file

        return speech_file(folder)
    if kind == "tts":
        from bench.csm_model import tts_file

        return tts_file(folder)
    return AUDIO_CHAT_DATA


def default_model(kind: str) -> str:
    """The tiny random model of ``kind`` in the models folder (built on first use, a few seconds)."""
    from trainer_core.settings import get_settings

    models = Path(get_settings().models_dir)
    if kind == "whisper":
        from bench.whisper_model import build_tiny_whisper

        return str(build_tiny_whisper(models / "bench-whisper-tiny-random"))
    if kind == "tts":
        from bench.csm_model import build_tiny_csm

        return str(build_tiny_csm(models / "bench-csm-tiny-random"))
    from bench.audio_chat_model import build_tiny_qwen2_audio
    from trainer_core.models.loading import materialize_default_tokenizer

    return str(build_tiny_qwen2_audio(materialize_default_tokenizer(models), models / "bench-Qwen2-Audio-tiny"))


def compare(kind: str, model_dir: str, steps: int, pairs: int, threads: Optional[int], here: bool) -> dict[str, Any]:
    """``pairs`` A B rounds of ``kind`` (fresh processes; ``here``: in this process); ``ab.summary``."""
    argv = ["--child", kind, "--model", model_dir, "--steps", str(steps)]
    runs = []
    for _ in range(pairs):
        for which in ("ours", "bare"):
            runs.append(
                side(kind, which, model_dir, steps)
                if here
                else spawn("bench.speech", [*argv, "--side", which], threads)
            )
            print(line(runs[-1]), flush=True)
    return {"kind": kind, "model": model_dir, "steps": steps, "pairs": pairs, "runs": runs, **summary(runs)}


def line(run: dict[str, Any]) -> str:
    """One run for people: side, seconds, samples / s, median step (wall, CPU), tokens, mean loss."""
    return (
        f"{run['kind']:10s} {run['side']:4s} {run['seconds']:7.1f} s  {run['samples_per_s']:.3f} samples/s  step "
        f"{run['median_step_ms']} ms (CPU {run['median_step_cpu_ms']} ms)  {run['tokens_per_step']} tokens/step  "
        f"mean loss {run['mean_loss']}"
    )


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the chosen kinds (``argv``: the command line's arguments); prints and returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", nargs="?", default="all", choices=[*KINDS, "all"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=2, help="A B pairs per kind")
    parser.add_argument("--threads", type=int, help="torch threads per side (1: CPU time least moved by other work)")
    parser.add_argument("--model", help="a model folder of the one kind chosen (default: its tiny random model)")
    parser.add_argument(
        "--quick", action="store_true", help="2 steps, one A B pair per kind, in this process (a smoke run)"
    )
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=["ours", "bare"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        report = side(args.child, args.side, args.model, args.steps)
        print(json.dumps(report))
        return report
    if args.quick:
        args.steps, args.pairs = 2, 1
    kinds = KINDS if args.kind == "all" else (args.kind,)
    if args.model and len(kinds) > 1:
        parser.error(f"--model names one kind's model: choose one of {', '.join(KINDS)}")
    found = {
        k: compare(k, args.model or default_model(k), args.steps, args.pairs, args.threads, args.quick) for k in kinds
    }
    report = {"bench": "speech", "settings": SETTINGS, "threads": args.threads, **found}
    print(json.dumps(report))
    for kind in kinds:
        r = found[kind]
        print(
            f"{kind}: ours {r['ours']['median_samples_per_s']} vs bare {r['bare']['median_samples_per_s']} samples/s "
            f"(x{r['ratio']}); median step {r['ours']['median_step_ms']} vs {r['bare']['median_step_ms']} ms "
            f"(x{r.get('step_ratio')}); CPU per step x{r.get('step_cpu_ratio')}; loss gap {r.get('loss_gap')} "
            "(target: within 10 %, i.e. >= 0.90)"
        )
    return report


if __name__ == "__main__":
    main()
