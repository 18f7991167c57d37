"""Benchmarks: ratios taken within one run, since these machines are shared and noisy."""
