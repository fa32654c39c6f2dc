"""The grammar libraries measured for constrained decoding (issue 50), without a model: for each
of llguidance, xgrammar and outlines-core that imports here, the seconds to wrap the tokenizer, the
ms to compile the tool call of ``bench.constrained`` (prefix + JSON schema + suffix) and the ms a
token of the library's own work (consume the token, compute the next mask) along a fixed answer.
Used by ``bench.constrained``; the others are measured after ``pip install --no-deps`` of
xgrammar==0.2.9 apache-tvm-ffi / outlines-core==0.2.14 (not requirements of the app).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

PASSES = 5  # walks along the answer, each with a fresh matcher


def _llguidance(tokenizer: Any, schema: dict, prefix: str, suffix: str, stops: list[int]) -> Any:
    """Each library's stages, one ``yield`` after each (timed by ``measure``): wrap the tokenizer,
    compile, then the walk along the answer's ids (uncached here: the app caches both)."""
    import llguidance
    import llguidance.hf
    import numpy as np

    from trainer_core.tools.constrain import _grammar

    ll = llguidance.hf.from_tokenizer(tokenizer, eos_token=stops)
    yield
    template = llguidance.LLMatcher(ll, _grammar(schema, prefix, suffix))
    yield
    mask = np.zeros((ll.vocab_size + 31) // 32, dtype=np.int32)

    def walk(ids: list[int]) -> None:
        matcher = template.deep_copy()
        for token in ids:
            matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
            matcher.consume_token(token)

    yield walk


def _xgrammar(tokenizer: Any, schema: dict, prefix: str, suffix: str, stops: list[int]) -> Any:
    import xgrammar as xgr

    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer, stop_token_ids=stops))
    yield
    parts = [
        xgr.Grammar.from_regex(re.escape(prefix)),
        xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False),
    ]
    grammar = compiler.compile_grammar(xgr.Grammar.concat(*parts, xgr.Grammar.from_regex(re.escape(suffix))))
    yield
    mask = xgr.allocate_token_bitmask(1, len(tokenizer))

    def walk(ids: list[int]) -> None:
        matcher = xgr.GrammarMatcher(grammar)
        for token in ids:
            matcher.fill_next_token_bitmask(mask, 0)
            assert matcher.accept_token(token), token

    yield walk


def _byte_vocabulary(tokenizer: Any, eos: int) -> dict[bytes, list[int]]:
    """Each token's bytes (GPT-2 byte-level BPE: one printable character a byte) -> its ids."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = printable + [256 + n for n in range(256 - len(printable))]
    byte_of = {chr(c): b for b, c in zip(printable + [b for b in range(256) if b not in printable], chars)}
    vocabulary: dict[bytes, list[int]] = {}
    for token, i in tokenizer.get_vocab().items():
        if i != eos and token not in tokenizer.all_special_tokens and all(c in byte_of for c in token):
            vocabulary.setdefault(bytes(byte_of[c] for c in token), []).append(i)
    return vocabulary


def _outlines_core(tokenizer: Any, schema: dict, prefix: str, suffix: str, stops: list[int]) -> Any:
    import outlines_core
    from outlines_core.json_schema import build_regex_from_schema

    vocabulary = outlines_core.Vocabulary(stops[0], _byte_vocabulary(tokenizer, stops[0]))
    yield
    index = outlines_core.Index(
        re.escape(prefix) + build_regex_from_schema(json.dumps(schema)) + re.escape(suffix), vocabulary
    )
    yield
    import torch

    mask = torch.zeros((len(tokenizer) + 31) // 32, dtype=torch.int32)

    def walk(ids: list[int]) -> None:
        guide = outlines_core.Guide(index)
        for token in ids:
            guide.write_mask_into(mask.data_ptr(), mask.numel(), 4)
            guide.advance(token)

    yield walk


LIBRARIES = {"llguidance": _llguidance, "xgrammar": _xgrammar, "outlines-core": _outlines_core}


def measure(tokenizer: Any, schema: dict, prefix: str, suffix: str, stops: list[int], answer: str) -> dict[str, Any]:
    """Per library: tokenizer wrap s, compile ms, ms a token along ``answer`` (its tokens), or why not."""
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    figures: dict[str, Any] = {}
    for name, steps in LIBRARIES.items():
        try:
            stages = steps(tokenizer, schema, prefix, suffix, stops)
            began = time.perf_counter()
            next(stages)
            wrapped = time.perf_counter()
            next(stages)
            built = time.perf_counter()
            walk = next(stages)
            walk(ids)  # first walk: warm caches, not timed
            began_walks = time.perf_counter()
            for _ in range(PASSES):
                walk(ids)
            per_token = (time.perf_counter() - began_walks) / (PASSES * len(ids))
        except ImportError as exc:
            figures[name] = f"not installed ({exc.name})"
            continue
        figures[name] = {
            "tokenizer_s": round(wrapped - began, 3),
            "compile_ms": round(1000 * (built - wrapped), 2),
            "ms_per_token": round(1000 * per_token, 4),
        }
    return figures
