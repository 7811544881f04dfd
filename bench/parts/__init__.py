"""The sections, helper processes and shared report writer of the bench/ entry points; none of
them is an entry point (the scripts at bench/ top level are, one per BENCHMARKS.md section)."""
