"""Audio-in chat models as a kind (``kind.AUDIO_CHAT``: Qwen2-Audio): which models are
(``family``), rows of turns with ``<audio>`` markers and their clips (``rows``, ``data``), the
batches they train on (``collator``, ``prepare``: answers scored, audio tokens never), chat with a
clip (``prompt``), the check's line (``check``) and GGUF's projector (``export``). The training
engine is the text one (``training.trainer``); the media-chat pieces it shares with the vision kind
live in ``data.media_chat`` and ``data.media_rows``."""
