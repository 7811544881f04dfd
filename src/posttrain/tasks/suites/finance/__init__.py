"""The finance suite: questions over 10-K-style reports of simulated companies; its probes."""
