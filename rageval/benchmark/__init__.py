"""The benchmark: its user-written files (schema), loading, validation and hashing, chunking with
stable IDs, tokenizers, importers (BEIR, TREC), TREC formats, append-only versions and label
migration."""
