"""Speech and audio training speed: our path against a bare script, for both audio kinds.

    python -m bench.speech [whisper|audio_chat|both] [--steps 40] [--pairs 2] [--threads 1]
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

Runs alternate A B A B, each in a fresh process (``bench.ab``): samples / s of ``train()``, the
median step after the first (wall and CPU time), the mean loss. Prints one JSON line, then a
human summary per kind.
"""

from __future__ import annotations

import argparse
import json
import queue
import tempfile
from pathlib import Path
from typing import Any, Optional

from bench.ab import LossLog, spawn, summary, timed_train

REPO = Path(__file__).resolve().parents[1]
AUDIO_CHAT_DATA = REPO.parent / "shared" / "datasets" / "mllm_audio_demo.json"
KINDS = ("whisper", "audio_chat")
SETTINGS = {
    "batch_size": 2,
    "learning_rate": 1e-4,
    "lr_scheduler_type": "constant",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "random_seed": 42,
    "mixed_precision": "no",
}
MAX_LENGTH = {"whisper": 64, "audio_chat": 1024}  # decoder tokens a transcript keeps; tokens a conversation keeps
WHISPER_TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]  # both stacks' blocks, cross-attention too
CHAT_TARGETS = r"^model\.language_model\.layers\.\d+\.(?:self_attn\.(?:q|k|v|o)_proj|mlp\.(?:gate|up|down)_proj)$"


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


def _bare_args(cls: Any, out: Path, steps: int, **extra: Any) -> Any:
    """``cls`` (``Seq2SeqTrainingArguments`` / ``SFTConfig``) with ``SETTINGS`` as a script writes them."""
    return cls(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SETTINGS["batch_size"],
        learning_rate=SETTINGS["learning_rate"],
        lr_scheduler_type=SETTINGS["lr_scheduler_type"],
        seed=SETTINGS["random_seed"],
        data_seed=SETTINGS["random_seed"],
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        remove_unused_columns=False,
        **extra,
    )


def _lora(targets: Any) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=SETTINGS["lora_r"],
        lora_alpha=SETTINGS["lora_alpha"],
        lora_dropout=SETTINGS["lora_dropout"],
        target_modules=targets,
    )


def decode(path: str, rate: int) -> Any:
    """A clip as a bare script reads it: soundfile, mixed to mono, soxr to ``rate`` Hz (float32)."""
    import numpy as np
    import soundfile
    import soxr

    samples, found = soundfile.read(path, dtype="float32", always_2d=True)
    return soxr.resample(samples.mean(axis=1), found, rate).astype(np.float32)


def _bare_whisper(model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
    """transformers' Whisper fine-tuning guide, with PEFT (see the module docstring)."""
    import datasets
    from peft import get_peft_model
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, WhisperForConditionalGeneration, WhisperProcessor
    from transformers.models.whisper.modeling_whisper import shift_tokens_right

    processor = WhisperProcessor.from_pretrained(model_dir, language="en", task="transcribe")
    extractor, tokenizer = processor.feature_extractor, processor.tokenizer
    prompt = len(tokenizer.prefix_tokens)  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>

    def prepare(row: dict) -> dict:
        clip = decode(str(data.parent / row["audio"]), extractor.sampling_rate)
        row["input_features"] = extractor(clip, sampling_rate=extractor.sampling_rate).input_features[0]
        row["labels"] = tokenizer(row["text"], max_length=MAX_LENGTH["whisper"], truncation=True).input_ids
        return row

    rows = datasets.load_dataset("json", data_files=str(data), split="train").map(prepare)
    rows = rows.remove_columns(["audio", "text"])
    model = WhisperForConditionalGeneration.from_pretrained(model_dir)
    model.generation_config.forced_decoder_ids = None
    start = model.config.decoder_start_token_id

    def collate(features: list[dict]) -> dict:  # the guide's DataCollatorSpeechSeq2SeqWithPadding
        inputs = [{"input_features": f["input_features"]} for f in features]
        batch = extractor.pad(inputs, return_tensors="pt")
        labels_batch = tokenizer.pad([{"input_ids": f["labels"]} for f in features], return_tensors="pt")
        labels = labels_batch["input_ids"].masked_fill(labels_batch.attention_mask.ne(1), -100)
        if (labels[:, 0] == start).all().cpu().item():
            labels = labels[:, 1:]
        # not in the guide: the prompt unscored, as ours (its tokens stay in the decoder's inputs)
        batch["decoder_input_ids"] = shift_tokens_right(labels, tokenizer.pad_token_id, start)
        labels[:, : prompt - 1] = -100
        batch["labels"] = labels
        return batch

    model = get_peft_model(model, _lora(WHISPER_TARGETS))
    args = _bare_args(Seq2SeqTrainingArguments, out, steps, label_names=["labels"])
    return Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        data_collator=collate,
        processing_class=processor,
        callbacks=[callback],
    )


def _bare_audio_chat(model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
    """TRL's ``SFTTrainer`` with the processor's collation (see the module docstring)."""
    import datasets
    from transformers import AutoModelForMultimodalLM, AutoProcessor
    from trl import SFTConfig, SFTTrainer

    processor = AutoProcessor.from_pretrained(model_dir)
    rate = processor.feature_extractor.sampling_rate
    audio_ids = processor.tokenizer.convert_tokens_to_ids(["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"])

    def turns(messages: list[dict]) -> list[dict]:
        out = []
        for turn in messages:
            text = turn["content"]
            parts = [{"type": "audio"} for _ in range(text.count("<audio>"))]
            out.append(
                {"role": turn["role"], "content": [*parts, {"type": "text", "text": text.replace("<audio>", "")}]}
            )
        return out

    def collate(rows: list[dict]) -> dict:
        texts = [processor.apply_chat_template(turns(row["messages"]), tokenize=False) for row in rows]
        clips = [decode(str(data.parent / clip), rate) for row in rows for clip in row["audios"]]
        batch = processor(text=texts, audio=clips, sampling_rate=rate, padding=True, return_tensors="pt")
        labels = batch["input_ids"].clone()
        labels[labels == processor.tokenizer.pad_token_id] = -100
        for token in audio_ids:
            labels[labels == token] = -100
        batch["labels"] = labels
        return batch

    rows = datasets.load_dataset("json", data_files=str(data), split="train")
    args = _bare_args(
        SFTConfig,
        out,
        steps,
        dataset_kwargs={"skip_prepare_dataset": True},
        include_num_input_tokens_seen="non_padding",
        gradient_checkpointing=False,
        bf16=False,
    )
    model = AutoModelForMultimodalLM.from_pretrained(model_dir, dtype="float32")
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        data_collator=collate,
        processing_class=processor,
        peft_config=_lora(CHAT_TARGETS),
        callbacks=[callback],
    )


def side(kind: str, which: str, model_dir: str, steps: int) -> dict[str, Any]:
    """One timed run of ``kind`` by ``which`` ("ours" | "bare"): ``ab.timed_train``'s figures and the
    tokens a step (audio chat: the processor's ``input_ids`` but padding; Whisper: not counted)."""
    import torch

    torch.manual_seed(SETTINGS["random_seed"])
    losses: list[float] = []
    ends: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        data = speech_data(Path(scratch)) if kind == "whisper" else AUDIO_CHAT_DATA
        bare = _bare_whisper if kind == "whisper" else _bare_audio_chat
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


def speech_data(folder: Path) -> Path:
    """The four demo clips and their transcripts, written into ``folder`` (as a user brings them)."""
    from bench.whisper_model import speech_file

    return speech_file(folder / "data")


def default_model(kind: str) -> str:
    """The tiny random model of ``kind`` in the models folder (built on first use, a few seconds)."""
    from trainer_core.settings import get_settings

    models = Path(get_settings().models_dir)
    if kind == "whisper":
        from bench.whisper_model import build_tiny_whisper

        return str(build_tiny_whisper(models / "bench-whisper-tiny-random"))
    from bench.audio_chat_model import build_tiny_qwen2_audio
    from trainer_core.models.loading import materialize_default_tokenizer

    return str(build_tiny_qwen2_audio(materialize_default_tokenizer(models), models / "bench-Qwen2-Audio-tiny"))


def compare(kind: str, model_dir: str, steps: int, pairs: int, threads: Optional[int]) -> dict[str, Any]:
    """``pairs`` A B rounds of ``kind`` (fresh processes); ``ab.summary`` of them."""
    argv = ["--child", kind, "--model", model_dir, "--steps", str(steps)]
    runs = []
    for _ in range(pairs):
        for which in ("ours", "bare"):
            runs.append(spawn("bench.speech", [*argv, "--side", which], threads))
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
    parser.add_argument("kind", nargs="?", default="both", choices=[*KINDS, "both"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=2, help="A B pairs per kind")
    parser.add_argument("--threads", type=int, help="torch threads per side (1: CPU time least moved by other work)")
    parser.add_argument("--model", help="a model folder of the one kind chosen (default: its tiny random model)")
    parser.add_argument("--quick", action="store_true", help="2 steps, one A B pair per kind (a smoke run)")
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
    kinds = KINDS if args.kind == "both" else (args.kind,)
    if args.model and len(kinds) > 1:
        parser.error("--model names one kind's model: choose whisper or audio_chat")
    found = {k: compare(k, args.model or default_model(k), args.steps, args.pairs, args.threads) for k in kinds}
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
