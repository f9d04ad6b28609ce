"""Benchmarks: workloads, parsing, statistics, path attestation."""
