"""Evaluation: run trials of a model on tasks, compute statistics with error bars, write reports.

stats.py holds the pure statistics; launch.py turns a request into a finished job; the
job layout on disk is jobdir.py; reports are report.py and compare.py. See docs/eval.md.
"""
