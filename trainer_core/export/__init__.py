"""Export a run: adapter zip, merged model, GGUF, Hub push; each checked before it is called done."""
