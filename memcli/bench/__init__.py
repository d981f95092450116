"""Benchmark support for ``mem bench``: dataset readers, pure metrics and report formatting.

Kept free of store/recall imports so the scoring logic can be tested on hand-made data.
"""
