"""Image-and-text (vision-language) models as a kind (``kind.VISION``): which models are
(``family``), their processors, image rows and the request's image switch (``rows``, ``data``), the
batches they train on (``collator``, ``prepare``), the LoRA targets in their vision towers
(``targets``), evaluation and chat with images (``evaluate``, ``prompt``), the GGUF projector
(``export``) and the check's line (``check``). The training engine is the text one
(``training.trainer``); this package supplies what differs."""
