"""The text-to-speech kind: Sesame CSM trained on (text, audio[, speaker]) rows (Orpheus-style SNAC models: ``kinds.orpheus``)."""
