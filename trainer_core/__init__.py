"""The engine of Finetune Studio (training, runs, serving, export), free of Gradio."""

from trainer_core.process.library_noise import drop_known_noise

drop_known_noise()  # before any worker can import bitsandbytes (process.library_noise)
