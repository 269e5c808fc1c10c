"""The knowledge base: entry files, their schema, loading, cache, signatures, evidence records, the full-text index."""
