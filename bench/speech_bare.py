"""The bare scripts ``bench.speech`` compares our trainers with, one a kind, each as its library's
own guide writes training (see ``bench.speech``'s docstring), and the settings both sides share.

- whisper: transformers' Whisper fine-tuning guide (``Seq2SeqTrainer``, features and label ids made
  in ``Dataset.map``, its padding collator, PEFT on the blocks' projections);
- audio_chat: TRL's ``SFTTrainer`` with a collator of the processor's own;
- tts: transformers' CSM docs (``CsmForConditionalGeneration``, each row a one-turn conversation of
  its speaker with the text and the clip, ``processor.apply_chat_template(..., tokenize=True,
  return_dict=True, output_labels=True)`` as the batch, the codec in eval mode) under ``Trainer``,
  PEFT LoRA on the backbone's and the depth decoder's block projections.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
MAX_LENGTH = {"whisper": 64, "audio_chat": 1024, "tts": 512}  # decoder tokens; conversation tokens; TTS positions
WHISPER_TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]  # both stacks' blocks, cross-attention too
CHAT_TARGETS = r"^model\.language_model\.layers\.\d+\.(?:self_attn\.(?:q|k|v|o)_proj|mlp\.(?:gate|up|down)_proj)$"


TTS_TARGETS = r"^(?:backbone_model|depth_decoder\.model)\.layers\.\d+\.(?:self_attn\.(?:q|k|v|o)_proj|mlp\.(?:gate|up|down)_proj)$"


def bare_args(cls: Any, out: Path, steps: int, **extra: Any) -> Any:
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


def lora(targets: Any) -> Any:
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


def bare_whisper(model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
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

    model = get_peft_model(model, lora(WHISPER_TARGETS))
    args = bare_args(Seq2SeqTrainingArguments, out, steps, label_names=["labels"])
    return Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        data_collator=collate,
        processing_class=processor,
        callbacks=[callback],
    )


def bare_audio_chat(model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
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
    args = bare_args(
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
        peft_config=lora(CHAT_TARGETS),
        callbacks=[callback],
    )


def bare_tts(model_dir: str, data: Path, steps: int, out: Path, callback: Any) -> Any:
    """transformers' CSM training as its docs write it, under ``Trainer`` with PEFT (see the module
    docstring): each batch the processor's, of the rows' clips decoded at the codec's rate."""
    import datasets
    from peft import get_peft_model
    from transformers import AutoProcessor, CsmForConditionalGeneration, Trainer, TrainingArguments

    processor = AutoProcessor.from_pretrained(model_dir)
    rate = processor.feature_extractor.sampling_rate
    rows = json.loads(data.read_text(encoding="utf-8"))

    def collate(batch: list[dict]) -> dict:  # each clip decoded as it is used, as a datasets Audio column does
        conversations = [
            [
                {
                    "role": str(row["speaker"]),
                    "content": [
                        {"type": "text", "text": row["text"]},
                        {"type": "audio", "path": decode(str(data.parent / row["audio"]), rate)},
                    ],
                }
            ]
            for row in batch
        ]
        return processor.apply_chat_template(conversations, tokenize=True, return_dict=True, output_labels=True)

    model = CsmForConditionalGeneration.from_pretrained(model_dir)
    model.train()
    model.codec_model.eval()
    model = get_peft_model(model, lora(TTS_TARGETS))
    return Trainer(
        model=model,
        args=bare_args(TrainingArguments, out, steps, label_names=["labels"]),
        train_dataset=datasets.Dataset.from_list(rows),
        data_collator=collate,
        callbacks=[callback],
    )


BARE = {"whisper": bare_whisper, "audio_chat": bare_audio_chat, "tts": bare_tts}
