"""Image-and-text (vision-language) models: which models are, their processors, image rows, the
batches they train on and the LoRA targets in their vision towers. The training engine is the text
one (``training.trainer``); this package supplies what differs."""
