"""The speech-to-text kind: Whisper trained as sequence-to-sequence on (audio, transcript) rows."""
