"""Benchmarks: cost, latency and scale of the approval flow, against the seed's pattern.

Run with:
    make bench                  # or: python -m benchmarks.run [--quick]

Writes benchmarks/results.md, benchmarks/results.json and docs/performance.png.
The offline model stands in for Gemini, so only framework and storage costs
are measured; see benchmarks/run.py for what each figure means.
"""
