"""Text-embedding models as a kind (``kind.EMBEDDING``): sentence-transformers folders (an encoder
such as BERT / MiniLM / ModernBERT, or a decoder with last-token pooling as Qwen3-Embedding) and a
causal LM turned into an embedder (``loading``: one way to load, save and reload them)."""
