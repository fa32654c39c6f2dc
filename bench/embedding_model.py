"""Random embedding models built offline as sentence-transformers folders, for the embedding tests
and benches (the Hub cannot be reached here).

- ``build_tiny_encoder``: a BERT-style encoder (``BertModel``, hidden 64, 2 layers) with a WordPiece
  tokenizer trained here on the shared datasets' text (``tokenizers``), mean pooling and normalize
  (as all-MiniLM-L6-v2's ``modules.json``).
- ``build_decoder_embedder``: a causal LM's folder (the tiny or the real SmolLM2) as a
  Qwen3-Embedding-style embedder: the base model, last-token pooling with left padding, normalize.

Both are saved with ``SentenceTransformer.save`` (``modules.json``, ``config_sentence_transformers.json``,
the pooling folder), so ``SentenceTransformer(folder)`` loads them. Weights are random (the tiny
encoder) or a chat model's (the decoder): their vectors mean little before training.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
TINY_BERT = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, max_position_embeddings=256
)


def _corpus() -> Iterator[str]:
    """Text to train the WordPiece vocabulary on: the Alpaca demo's instructions and outputs."""
    for row in json.loads((SHARED / "alpaca_en_demo.json").read_text(encoding="utf-8")):
        yield row["instruction"] + " " + row.get("input", "") + " " + row["output"]


def _wordpiece(target: Path, vocab_size: int = 2000) -> None:
    """A BERT WordPiece tokenizer (lower case, [CLS] / [SEP] / [PAD] / [UNK] / [MASK]) trained on
    ``_corpus`` and saved in ``target`` as ``BertTokenizerFast`` files."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(_corpus(), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tok.decoder = decoders.WordPiece()
    fast = BertTokenizerFast(tokenizer_object=tok, model_max_length=TINY_BERT["max_position_embeddings"])
    fast.save_pretrained(target)


def build_tiny_encoder(target: Path, seed: int = 0) -> Path:
    """A random BERT-style sentence-transformers model in ``target`` (built once: an existing
    ``modules.json`` is kept). Returns ``target``."""
    if (target / "modules.json").is_file():
        return target
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel

    raw = target.parent / f"{target.name}-hf"
    _wordpiece(raw)
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(raw))
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=vocab, **TINY_BERT)).save_pretrained(raw)
    body = Transformer(str(raw), max_seq_length=128)
    pooling = Pooling(body.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[body, pooling, Normalize()], device="cpu").save(str(target))
    shutil.rmtree(raw)
    return target


def build_decoder_embedder(base: Path, target: Path) -> Path:
    """The causal LM in ``base`` as a last-token-pooling embedder in ``target`` (left padding, as
    Qwen3-Embedding's tokenizer pads). Built once: an existing ``modules.json`` is kept."""
    if (target / "modules.json").is_file():
        return target
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from trainer_core.kinds.embedding.loading import TEXT_ONLY

    body = Transformer(
        str(base),
        max_seq_length=256,
        processor_kwargs={"padding_side": "left"},
        modality_config=TEXT_ONLY,
        module_output_name="token_embeddings",
    )
    if body.tokenizer.pad_token is None:
        body.tokenizer.pad_token = body.tokenizer.eos_token
    pooling = Pooling(body.get_embedding_dimension(), pooling_mode="lasttoken")
    SentenceTransformer(modules=[body, pooling, Normalize()], device="cpu").save(str(target))
    return target
