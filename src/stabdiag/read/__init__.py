"""Reading: paths and URIs in, Runs out (Run/Series, the readers of every source kind in formats/, which
files make one training run in assemble, how a run ended in ending/).  Knows nothing of signals or rules."""
