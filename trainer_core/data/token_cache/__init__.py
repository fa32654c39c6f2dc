"""Tokenize once: tokenized splits kept as Arrow files under the data dir's ``token_cache/``, keyed
by a fingerprint of the data, the tokenizer and every setting that changes tokens, bounded by size."""
