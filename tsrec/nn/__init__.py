"""Tensor-level building blocks: REMs, attention kernels, embeddings, encoder and decoder."""
