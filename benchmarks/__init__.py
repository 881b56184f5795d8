"""Benchmarks for tsrec."""
