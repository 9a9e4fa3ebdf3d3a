"""Documentation trees as benchmark corpora: Markdown (mkdocs or plain), HTML and text pages, made
indexable text by named, versioned preprocessing steps (:mod:`.steps`) that the benchmark records.
See docs/importing-docs.md."""
