"""Recipe sources: documents converted to text (markitdown) and chunked by tokens, seed rows, topics."""
