"""Judging a run while it trains: `stabdiag watch` (watch/) and the training callbacks (integrations/)."""
