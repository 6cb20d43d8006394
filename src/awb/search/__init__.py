"""Finding tools again: full-text BM25, and (with the `embed` extra) dense vectors, fused."""
