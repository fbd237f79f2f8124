"""The evidence layer the detectors share: whether a change is sure and large, and when it began."""
