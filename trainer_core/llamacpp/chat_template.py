"""The chat template stored in a GGUF, rendered as llama.cpp's users render it.

llama-cpp-python's ``Jinja2ChatFormatter`` (what its OpenAI-compatible server uses) with the
file's ``tokenizer.chat_template`` and its BOS / EOS token texts; the text is then tokenized by
llama.cpp's tokenizer with special tokens parsed and no BOS added (the template writes it when the
model wants one). Used by the export check (``probe``) and by chat with a GGUF
(``serving.gguf_worker``). Imports ``llama_cpp`` only when called: the caller has put the build on
``sys.path``.
"""

from __future__ import annotations

from typing import Any, Optional


class TemplateRenderer:
    """Renders conversations with the chat template of the loaded ``llama_cpp.Llama`` ``llm``.
    ``chat_template`` is the template text (None when the file has none); ``apply_chat_template``
    mirrors transformers' call (``tokenize=False``) so that ``data.template_fit`` can probe it."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._llm = llm
        self.chat_template: Optional[str] = llm.metadata.get("tokenizer.chat_template") or None
        vocab = llama_cpp.llama_model_get_vocab(llm.model)

        def token(i: int) -> str:
            return llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace") if i >= 0 else ""

        self._eos, self._bos = token(llm.token_eos()), token(llm.token_bos())

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        tokenize: bool = False,
        add_generation_prompt: bool = False,
        tools: Optional[list[dict[str, Any]]] = None,
    ) -> Any:
        """The rendered text (``tokenize=False``) or its token ids; ``tools`` (OpenAI function tools)
        go to the template as transformers passes them. Raises ValueError when the file has no chat
        template, or the template's own error (jinja2 errors, ValueError)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if not self.chat_template:
            raise ValueError("the GGUF file has no chat template (tokenizer.chat_template)")
        formatter = Jinja2ChatFormatter(
            template=self.chat_template,
            eos_token=self._eos,
            bos_token=self._bos,
            add_generation_prompt=add_generation_prompt,
        )
        text = formatter(messages=messages, tools=tools).prompt
        return self.ids(text) if tokenize else text

    def ids(self, text: str) -> list[int]:
        """``text`` tokenized by llama.cpp (special tokens parsed, no BOS added)."""
        return [int(i) for i in self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)]
