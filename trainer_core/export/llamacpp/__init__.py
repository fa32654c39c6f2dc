"""llama.cpp for GGUF exports: the process that runs it (``probe``, started by ``client``) to quantise
and to check each exported file (``check``). Where the build is: ``trainer_core.llamacpp.build``."""
