"""Judging: the rules (checklist/ TOML, detectors/ code, stats/ the evidence they rest on), the engine that
runs them on a run's signals layer by layer, and the Diagnosis it returns.  Never imports a reporter or a
reader of files."""
