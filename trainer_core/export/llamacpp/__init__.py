"""llama.cpp for GGUF exports: where its build is (``tools``), the process that runs it (``probe``,
started by ``client``), and the check it runs on each exported file (``check``)."""
