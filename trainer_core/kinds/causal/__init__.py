"""The causal text LM, the fallback kind: rows of text or conversations tokenized and masked by
``data.tokenization``, trained by ``training.trainer``, evaluated by ``evaluation.loss`` /
``evaluation.generation`` and served by ``serving.generate``. Those shared layers are its way, so
this kind only names itself (``kind``)."""
