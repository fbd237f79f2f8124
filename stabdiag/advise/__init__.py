"""Advice on a judged run: what its failure costs, when a trend will cross its bar, which stability
methods it runs and what to try, a baseline compared, the runs a nightly selection picks."""
