"""The modules of ``trainer_core/`` that no test imports by name, each with the reason and the tests
that run it. Every other module is imported by a test (``tests/repo/test_test_layout.py`` checks
both: a module neither imported nor listed here, and a listed module a test now imports, fail)."""

from __future__ import annotations

INDIRECT: dict[str, str] = {
    # commands: run as a user runs them, in a subprocess
    "trainer_core.cli.evaluate": "the `evaluate` command, run as a subprocess by "
    "tests/trainer_core/evaluation/test_sources.py and tests/trainer_core/kinds/vision/test_processor.py",
    "trainer_core.cli.export": "the `export` command, run as a subprocess by tests/trainer_core/export/test_start.py "
    "and tests/e2e/test_export_real.py",
    "trainer_core.cli.import_runs": "the `import-runs` command, run as a subprocess by "
    "tests/trainer_core/runs/test_integrity.py",
    # worker-side modules: they run in the processes the tests start
    "trainer_core.kinds.text_to_speech.trainer": "a CSM run's trainer, built by its kind in training.worker; "
    "tests/trainer_core/kinds/text_to_speech/test_trainer.py and tests/e2e/test_tts_runs.py train through it",
    "trainer_core.serving.slot": "serving.engine's inference worker (load, commands, a killed or abandoned worker); "
    "tests/trainer_core/serving/test_engine.py",
    "trainer_core.serving.turns": "serving.engine's queue of generations; "
    "tests/trainer_core/serving/test_engine.py::test_generations_take_turns_in_arrival_order",
    "trainer_core.llamacpp.probe": "the llama.cpp process llamacpp.client starts; "
    "tests/trainer_core/export/test_gguf_export.py and tests/e2e/test_export_real.py",
    "trainer_core.llamacpp.chat_template": "the GGUF's template as llama.cpp renders it, used by llamacpp.probe "
    "and serving.gguf_worker; tests/e2e/test_export_real.py (template removed: the check fails)",
    "trainer_core.process.standby": "the worker started ahead of Start; runs.job starts it in "
    "tests/trainer_core/runs/test_job.py (standby tests) and tests/e2e/test_processes_end_cleanly.py",
    "trainer_core.process.parent": "a worker ends with its app; tests/e2e/test_processes_end_cleanly.py "
    "and tests/e2e/test_api.py (the app killed, no worker left)",
    "trainer_core.process.library_noise": "imported by trainer_core/__init__.py in every process; "
    "tests/ui/test_quiet_errors.py checks the lines it drops",
    "trainer_core.process.tool_output": "follows llama.cpp's converter and probe; tests/trainer_core/export/test_start_faults.py "
    "(a converter killed or cancelled) and tests/trainer_core/export/test_gguf_export.py",
    "trainer_core.distributed.env": "the rank variables torchrun sets, read in each rank; "
    "tests/e2e/test_distributed_runs.py and tests/e2e/test_multinode.py",
    "trainer_core.training.grpo": "GRPO's trainer, built in the training worker; tests/e2e/test_grpo_api.py "
    "and tests/e2e/test_grpo_page.py train with it",
    "trainer_core.export.adapter_zip": "the export worker's adapter zip; "
    "tests/e2e/test_export_real.py::test_adapter_zip_holds_adapter_tokenizer_and_card",
    # parts of a larger module that the tests import
    "trainer_core.hub_ids": "request.data, models.hub and export.hub_push ask it; tests/trainer_core/models/test_hub.py "
    "and tests/trainer_core/export/test_start.py send bad repo ids",
    "trainer_core.data.json_check": "data.files' JSON reader; tests/trainer_core/data/test_files.py "
    "(line and column of a broken file)",
    "trainer_core.data.text_values": "numbers and true/false made text by data.formats; "
    "tests/trainer_core/data/test_prepare_shapes.py",
    "trainer_core.data.preference_tokens": "preference rows tokenized as TRL does; "
    "tests/trainer_core/data/test_preference.py and tests/trainer_core/preflight/test_check.py",
    "trainer_core.data.prompt_fit": "GRPO prompts that fit max_seq_length, kept by data.prepare; "
    "tests/e2e/test_grpo_api.py",
    "trainer_core.data.prompt_tokens": "GRPO prompts counted in tokens by data.tokenization and data.inspect; "
    "tests/trainer_core/preflight/test_check.py (GRPO check)",
    "trainer_core.models.embeddings": "the embedding modules found in a model; "
    "tests/trainer_core/training/test_embedding_rate.py",
    "trainer_core.models.remote_code": "trust_remote_code's rules; tests/trainer_core/preflight/test_check_remote_code.py",
    "trainer_core.preflight.costs": "the estimates' inputs, taken by preflight.check; "
    "tests/trainer_core/preflight/test_estimates.py",
    "trainer_core.preflight.grpo": "the check's GRPO line; tests/trainer_core/preflight/test_check.py",
    "trainer_core.preflight.samples": "the check's sample rows; tests/trainer_core/preflight/test_check.py "
    "and tests/trainer_core/cli/test_check.py",
    "trainer_core.preflight.structure": "the check's view of the model's config; "
    "tests/trainer_core/models/test_targets.py and tests/e2e/test_families_api.py",
    "trainer_core.preflight.tokens": "the check's token counts; tests/trainer_core/preflight/test_check.py "
    "(sums against tokenize_dataset's stats)",
    "trainer_core.runs.reimport": "the history rebuilt from run folders; tests/trainer_core/runs/test_integrity.py "
    "(start-up and `import-runs`)",
    "trainer_core.runs.series_store": "the stored loss series behind runs.compare and runs.store; "
    "tests/trainer_core/runs/test_compare.py",
    # the vision kind's parts, reached through its ModelKind (kinds.vision.kind)
    "trainer_core.kinds.vision.check": "the check's vision line; tests/e2e/test_vision_api.py",
    "trainer_core.kinds.vision.data": "whether rows keep their images; tests/trainer_core/kinds/vision/test_rows.py",
    "trainer_core.kinds.vision.evaluate": "evaluation on image rows; tests/trainer_core/kinds/vision/test_processor.py",
    "trainer_core.kinds.vision.export": "the GGUF projector's refusal; tests/trainer_core/kinds/vision/test_processor.py",
    "trainer_core.kinds.vision.prompt": "chat inputs with images; tests/trainer_core/kinds/vision/test_processor.py "
    "and tests/e2e/test_vision_page.py",
    "trainer_core.kinds.vision.targets": "LoRA targets in the vision tower; tests/trainer_core/kinds/vision/test_family.py",
    # shared by the audio kinds and the embedding kind, reached through each kind's own modules
    "trainer_core.data.audio_splits": "the clip splits and their counts; tests/trainer_core/kinds/speech_to_text/"
    "test_data.py and tests/trainer_core/kinds/text_to_speech/test_kind.py",
    "trainer_core.evaluation.kind_result": "the kinds' evaluation results; tests/trainer_core/kinds/*/test_evaluation.py",
    "trainer_core.export.processor_merged": "the merged export with the processor; tests/trainer_core/kinds/"
    "speech_to_text/test_export.py and tests/trainer_core/kinds/text_to_speech/test_export.py",
    "trainer_core.preflight.clip_report": "the audio kinds' check report; tests/trainer_core/kinds/speech_to_text/"
    "test_kind.py and tests/trainer_core/kinds/text_to_speech/test_kind.py",
    "trainer_core.kinds.embedding.preview": "the embedding preview (ModelKind.preview_rows); "
    "tests/trainer_core/kinds/embedding/test_preview.py",
    "trainer_core.kinds.embedding.values": "the embedding rows' value checks; tests/trainer_core/kinds/embedding/"
    "test_preview.py and test_data.py",
    "trainer_core.kinds.text_to_speech.targets": "LoRA targets of CSM's backbone and depth decoder; "
    "tests/trainer_core/kinds/text_to_speech/test_trainer.py and tests/e2e/test_tts_runs.py",
    "trainer_core.kinds.orpheus.estimates": "Orpheus' estimates (the text LM's); OrpheusKind.estimates in "
    "tests/trainer_core/kinds/orpheus/test_kind.py (the check report's memory and time)",
    "trainer_core.serving.one_answer": "ChatEngine's embed / transcribe / speak (a base of it); "
    "tests/trainer_core/serving/test_engine.py and the /v1 audio and embedding tests",
}
