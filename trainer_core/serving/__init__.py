"""Using what was trained: the inference worker, the chat engine, model choices, share links."""
