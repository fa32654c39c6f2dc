"""Tiny random models of the families users bring, built offline from transformers configs.

Each has hidden 64, 2 layers and the bundled SmolLM2 tokenizer (49,152 tokens, ChatML template,
``<|im_end|>`` as eos and pad), so every family trains, chats and exports in seconds; the family
shows in its module layout and attention support (fused ``qkv_proj``, GPT-2's ``Conv1D``, Falcon's
``query_key_value``, Gemma 2's soft-capping without SDPA, gpt-oss's sinks and experts, Qwen3-MoE's
fused experts and router). Weights are random: outputs mean nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.tiny_model import save_with_tokenizer

SPECIAL = dict(vocab_size=49152, bos_token_id=1, eos_token_id=2, pad_token_id=2)
ATTENTION = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
LLAMA_LIKE = dict(ATTENTION, intermediate_size=128)
MLA = dict(
    q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16
)  # DeepSeek's attention


def _configs() -> dict[str, Callable[[], Any]]:
    import transformers as t

    moe = dict(num_experts_per_tok=2, moe_intermediate_size=32)
    deepseek = dict(moe, n_routed_experts=4, n_shared_experts=1, n_group=1, topk_group=1)
    return {
        "llama": lambda: t.LlamaConfig(**LLAMA_LIKE, head_dim=16),
        "qwen2": lambda: t.Qwen2Config(**LLAMA_LIKE),
        "qwen3": lambda: t.Qwen3Config(**LLAMA_LIKE, head_dim=16),
        "mistral": lambda: t.MistralConfig(**LLAMA_LIKE, head_dim=16),
        "gemma": lambda: t.GemmaConfig(**LLAMA_LIKE, head_dim=16),
        "gemma2": lambda: t.Gemma2Config(**LLAMA_LIKE, head_dim=16),
        "gemma3_text": lambda: t.Gemma3TextConfig(**LLAMA_LIKE, head_dim=16, sliding_window=32),
        "phi3": lambda: t.Phi3Config(**LLAMA_LIKE),
        # Phi-2's GGUF converter writes feed_forward_length = 4 x hidden (as Phi-2 has): keep that shape
        "phi": lambda: t.PhiConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4),
        "gpt2": lambda: t.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512),
        "falcon": lambda: t.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
        "gpt_neox": lambda: t.GPTNeoXConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4
        ),
        "starcoder2": lambda: t.Starcoder2Config(**LLAMA_LIKE),
        "olmo2": lambda: t.Olmo2Config(**LLAMA_LIKE),
        "granite": lambda: t.GraniteConfig(**LLAMA_LIKE),
        "qwen3_moe": lambda: t.Qwen3MoeConfig(**LLAMA_LIKE, head_dim=16, num_experts=4, **moe),
        "mixtral": lambda: t.MixtralConfig(**LLAMA_LIKE, head_dim=16, num_local_experts=4, num_experts_per_tok=2),
        "gpt_oss": lambda: t.GptOssConfig(**LLAMA_LIKE, head_dim=16, num_local_experts=4, num_experts_per_tok=2),
        # mixed dense + MoE layouts: dense first layers, shared experts, MLA attention
        "deepseek_v3": lambda: t.DeepseekV3Config(**LLAMA_LIKE, **MLA, first_k_dense_replace=1, **deepseek),
        "deepseek_v3_all_moe": lambda: t.DeepseekV3Config(**LLAMA_LIKE, **MLA, first_k_dense_replace=0, **deepseek),
        "deepseek_v2": lambda: t.DeepseekV2Config(**LLAMA_LIKE, **MLA, first_k_dense_replace=1, **deepseek),
        "glm4_moe": lambda: t.Glm4MoeConfig(**LLAMA_LIKE, head_dim=16, first_k_dense_replace=1, **deepseek),
        "dots1": lambda: t.Dots1Config(**LLAMA_LIKE, first_k_dense_replace=1, **deepseek),
        "qwen3_moe_dense_first": lambda: t.Qwen3MoeConfig(
            **LLAMA_LIKE, head_dim=16, num_experts=4, mlp_only_layers=[0], **moe
        ),
        "qwen2_moe": lambda: t.Qwen2MoeConfig(**LLAMA_LIKE, num_experts=4, shared_expert_intermediate_size=32, **moe),
        "qwen3_next": lambda: t.Qwen3NextConfig(
            **LLAMA_LIKE, head_dim=16, num_experts=4, shared_expert_intermediate_size=32, **moe
        ),
        "ernie4_5_moe": lambda: t.Ernie4_5_MoeConfig(
            **LLAMA_LIKE, moe_num_experts=4, moe_k=2, moe_num_shared_experts=1, moe_layer_start_index=1
        ),
        "olmoe": lambda: t.OlmoeConfig(**LLAMA_LIKE, num_experts=4, num_experts_per_tok=2),
        "flex_olmo": lambda: t.FlexOlmoConfig(**LLAMA_LIKE, num_experts=4, num_experts_per_tok=2),
        "phimoe": lambda: t.PhimoeConfig(**LLAMA_LIKE, num_local_experts=4, num_experts_per_tok=2),
        "granitemoe": lambda: t.GraniteMoeConfig(**LLAMA_LIKE, num_local_experts=4, num_experts_per_tok=2),
        "minimax": lambda: t.MiniMaxConfig(**LLAMA_LIKE, head_dim=16, num_local_experts=4, num_experts_per_tok=2),
    }


FAMILIES = (
    "llama qwen2 qwen3 mistral gemma gemma2 gemma3_text phi3 phi gpt2 falcon gpt_neox starcoder2 olmo2 granite "
    "qwen3_moe mixtral gpt_oss"
).split()


# every MoE family transformers builds offline (FAMILIES' three, then the layouts above): the LoRA coverage
# test adapts each. Left out: Jamba (Mamba layers; two of its LoRA B matrices got no gradient in one step, not
# looked into) and HunYuan-MoE (this tiny config did not build)
MOE_FAMILIES = (
    "qwen3_moe mixtral gpt_oss deepseek_v3 deepseek_v3_all_moe deepseek_v2 glm4_moe dots1 qwen3_moe_dense_first "
    "qwen2_moe qwen3_next ernie4_5_moe olmoe flex_olmo phimoe granitemoe minimax"
).split()


def family_config(family: str) -> Any:
    """The tiny config of ``family`` (one of ``FAMILIES`` or ``MOE_FAMILIES``) with the bundled tokenizer's ids."""
    config = _configs()[family]()
    for name, value in SPECIAL.items():
        setattr(config, name, value)
    return config


def build_family_model(family: str, tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """Write a tiny random ``family`` model with the tokenizer files of ``tokenizer_dir`` to
    ``target`` (``save_with_tokenizer``) and return it; an existing complete ``target`` is returned
    as it is."""
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(family_config(family), dtype=torch.float32)
    return save_with_tokenizer(model, tokenizer_dir, target)


SENTENCEPIECE = ("gemma", "gemma2", "phi3", "qwen2")  # their converter reads tokenizer.model first (see below)


def add_sentencepiece(target: Path, text_file: Path, vocab_size: int = 1024) -> Path:
    """Write a small SentencePiece ``tokenizer.model`` (BPE with byte fallback, as Llama 2's,
    Gemma's and Phi-3's have: ``vocab_size`` pieces, 256 of them bytes, trained on the
    ``text`` rows of the JSON-lines ``text_file`` in about a second) into the model folder
    ``target``, as Gemma, Gemma 2 and Phi-3 checkpoints ship one: llama.cpp's converter builds
    their GGUF vocabulary from it (and Qwen2's from it when present; without it, from the
    pre-tokenizer of the tokenizer transformers loads, which for the bundled vocabulary under
    Qwen2's tokenizer class matches none the converter knows). Its first ids are the bundled
    tokenizer's special tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...), as in
    the tokenizer files beside it, then SentencePiece's ``<unk>``, ``<s>``, ``</s>`` (llama.cpp
    looks them up for a model named Phi-3); ids past the pieces are padding in the GGUF. Returns
    the file."""
    import io
    import json

    import sentencepiece as spm

    rows = [json.loads(line)["text"] for line in Path(text_file).read_text(encoding="utf-8").splitlines() if line]
    fast = json.loads((Path(target) / "tokenizer.json").read_text(encoding="utf-8"))
    added = {int(t["id"]): t["content"] for t in fast.get("added_tokens") or []}
    specials = [added[i] for i in range(len(added)) if i in added]  # ids 0..n-1: the same ids in the model
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(rows),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        unk_piece=specials[0],
        bos_piece=specials[1],
        eos_piece=specials[2],
        user_defined_symbols=[*specials[3:], *(t for t in ("<unk>", "<s>", "</s>") if t not in specials)],
        byte_fallback=True,
        minloglevel=2,
    )
    path = Path(target) / "tokenizer.model"
    path.write_bytes(model.getvalue())
    return path


def family_model(family: str) -> Any:
    """The tiny ``family`` model in memory (seed 0), loaded with the attention training would use
    (``models.attention_choice.load_attention``)."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer_core.models.attention_choice import load_attention

    config = family_config(family)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=load_attention(config, "cpu"))
