"""Tool calling and structured outputs: call schemas, constrained decoding, call parsing."""
