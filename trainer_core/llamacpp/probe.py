"""The process that runs llama.cpp: quantise a GGUF, or check one the way llama.cpp users run it.

``python -m trainer_core.llamacpp.probe FOLDER`` reads one JSON request on stdin and writes
one JSON line on stdout, prefixed ``RESULT `` (llama.cpp's own log goes to stderr). ``FOLDER`` is
the llama.cpp build (``trainer_core.llamacpp.build``), appended to ``sys.path`` after site-packages so that nothing in
it shadows the app's packages. Imports only the standard library, numpy and ``llama_cpp``; never
torch. Started and read by ``client``.

Requests:

- ``{"op": "quantize", "source": F16_GGUF, "target": PATH, "type": "q4_k_m", "threads": N}`` ->
  ``{"file_type": 15}``: ``llama_model_quantize`` (llama.cpp's ``tools/quantize``, the same code as
  its ``llama-quantize``) with its default parameters, i.e. the output tensor at Q6_K for K-quants.
- ``{"op": "check", "gguf": PATH, "prompts": [[ids]], "answers": [[ids]], "messages": [...],
  "end_of_turn": ID, "threads": N}`` -> ``{"free", "forced", "template_ids", "end_of_turn_is_eog",
  "file_type", "stops_at"}``: with the model loaded in llama.cpp (logits for every position),
  ``forced`` is the argmax at each answer position when it reads prompt + answer (one ``eval``),
  ``free`` its own greedy continuation of each prompt, as long as the answer, from its first
  forced difference on (before it, free = answer, as in ``check.exported_answers``);
  ``template_ids`` the ids of ``messages`` rendered by the chat template stored in the GGUF
  (llama-cpp-python's ``Jinja2ChatFormatter``, what its server uses) and tokenized by llama.cpp's
  tokenizer; ``end_of_turn_is_eog`` whether llama.cpp stops generation at the run's end-of-turn id.
- ``{"op": "embed", "gguf": PATH, "texts": [str], "threads": N}`` -> ``{"vectors": [[float]],
  "pooling_type": N, "file_type": N}``: the embedding of each text as llama.cpp makes it for an embedding model
  (llama-cpp-python's ``Llama(embedding=True).embed``, what its server's ``/v1/embeddings`` runs),
  pooled by the file's own ``pooling_type`` (1 mean, 2 cls, 3 last), not normalized.
- ``{"op": "generate", "gguf": PATH, "prompt": [ids], "max_tokens": N, "threads": N}`` ->
  ``{"tokens": [ids], "seconds", "load_seconds"}``: greedy generation (top-1) until an
  end-of-generation token or ``max_tokens``; ``seconds`` from the prompt's evaluation to the last
  token (what a chat user waits for once the model is loaded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# llama.cpp's file types (include/llama.h, enum llama_ftype) for the formats offered.
FILE_TYPES = {"f16": 1, "q4_0": 2, "q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "bf16": 32}


def quantize(request: dict) -> dict:
    """Quantise ``request["source"]`` (a GGUF in f16 / bf16 / f32) to ``request["type"]``."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FILE_TYPES[request["type"]]
    params.nthread = int(request.get("threads") or 0)
    code = llama_cpp.llama_model_quantize(
        str(request["source"]).encode(), str(request["target"]).encode(), llama_cpp.byref(params)
    )
    if code != 0 or not Path(request["target"]).is_file():
        raise RuntimeError(f"llama.cpp's quantizer returned {code} (its log above says why)")
    return {"file_type": params.ftype}


def check(request: dict) -> dict:
    """Answer, predict and render as described in the module docstring."""
    import llama_cpp
    import numpy as np

    from trainer_core.llamacpp.chat_template import TemplateRenderer

    prompts, answers = request["prompts"], request["answers"]
    longest = max(len(p) + len(a) for p, a in zip(prompts, answers))
    threads = int(request.get("threads") or 1)
    llm = llama_cpp.Llama(
        model_path=str(request["gguf"]),
        n_ctx=max(512, longest + 8),
        n_batch=512,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        n_gpu_layers=0,
        verbose=True,  # llama.cpp's log on stderr: the client streams it and quotes its error line
    )
    forced, free = [], []
    for prompt, answer in zip(prompts, answers):
        llm.reset()
        llm.eval(list(prompt) + list(answer))
        predicted = np.argmax(llm.scores[len(prompt) - 1 : len(prompt) + len(answer) - 1], axis=-1).tolist()
        forced.append([int(t) for t in predicted])
        same = next((i for i, (a, b) in enumerate(zip(answer, predicted)) if a != b), len(answer))
        head = list(answer[:same]) + ([int(predicted[same])] if same < len(answer) else [])
        free.append(head + _greedy(llm, list(prompt) + head, len(answer) - len(head)))
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    template = TemplateRenderer(llm)
    template_ids = None
    if template.chat_template:
        template_ids = template.apply_chat_template(request["messages"], tokenize=True, add_generation_prompt=True)
    end = request.get("end_of_turn")
    eog = bool(end is not None and llama_cpp.llama_vocab_is_eog(vocab, int(end)))
    file_type = int(llm.metadata.get("general.file_type", -1))
    llm.close()  # now, not in __del__ at interpreter exit (which then finds llama_cpp half torn down)
    return {
        "forced": forced,
        "free": free,
        "template_ids": template_ids,
        "end_of_turn_is_eog": eog,
        "file_type": file_type,
    }


def embed(request: dict) -> dict:
    """Embed the texts as described in the module docstring."""
    import llama_cpp

    threads = int(request.get("threads") or 1)
    llm = llama_cpp.Llama(
        model_path=str(request["gguf"]),
        embedding=True,
        n_ctx=512,
        n_batch=512,
        n_ubatch=512,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=0,
        verbose=True,  # llama.cpp's log on stderr: the client quotes its error line
    )
    pooling = int(llama_cpp.llama_pooling_type(llm.ctx))
    vectors = [[float(x) for x in llm.embed(text, normalize=False)] for text in request["texts"]]
    file_type = int(llm.metadata.get("general.file_type", -1))
    llm.close()
    return {"vectors": vectors, "pooling_type": pooling, "file_type": file_type}


def generate(request: dict) -> dict:
    """Greedy generation as described in the module docstring."""
    import time

    import llama_cpp

    threads = int(request.get("threads") or 1)
    began = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=str(request["gguf"]),
        n_ctx=len(request["prompt"]) + int(request["max_tokens"]) + 8,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=0,
        verbose=False,
    )
    loaded = time.perf_counter()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    tokens = []
    for token in llm.generate(list(request["prompt"]), top_k=1, temp=0.0, reset=True):
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        tokens.append(int(token))
        if len(tokens) >= int(request["max_tokens"]):
            break
    ended = time.perf_counter()
    llm.close()
    return {"tokens": tokens, "seconds": ended - loaded, "load_seconds": loaded - began}


def _greedy(llm, context: list[int], n: int) -> list[int]:
    """``n`` greedy ids after ``context`` (the model's own argmax, no sampler, no stop)."""
    import numpy as np

    if n <= 0:
        return []
    llm.reset()
    llm.eval(context)
    out = []
    while True:
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        if len(out) == n:
            return out
        llm.eval([out[-1]])


def main() -> int:
    """Entry point: argv[1] is the llama.cpp build folder; the request comes on stdin."""
    sys.path.append(sys.argv[1])
    request = json.loads(sys.stdin.read())
    try:
        answer = {"quantize": quantize, "check": check, "embed": embed, "generate": generate}[request["op"]](request)
    except Exception as exc:  # noqa: BLE001 - the process boundary: the client reports it
        print("RESULT " + json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print("RESULT " + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
