"""llama.cpp, the program people run GGUF files with: where the studio's build of it is and whether
it can be used here (``build``), the process that runs it (``probe``, started and followed by
``client``: quantise, check, generate) and the chat template stored in a GGUF rendered as its users
render it (``chat_template``). Used by the export (quantise, and ``export.llamacpp_check``) and by
chat with an exported GGUF (``serving.gguf_worker``)."""
