"""The JSON Schemas (draft 2020-12) of stabdiag's machine-readable output: `check --format json` and
`signals --format json`.  `stabdiag schema` prints them; the test suite validates every report it makes
against them, so a field added to a report without being added here fails the tests.

Objects that stabdiag defines are closed (`additionalProperties: false`): a reader can rely on each
key it sees being documented.  What a detector measured (`evidence`) and the cost estimate's inputs stay
open, because they differ by rule and by what a run logged.
"""

from __future__ import annotations

from ..judge.diagnosis import SCHEMA_VERSION

SIGNALS_SCHEMA_VERSION = "1.0"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number"}
_STRS = {"type": "array", "items": _STR}
_LAYER = {"type": "integer", "minimum": 1, "maximum": 4}
_STEP = {"type": ["integer", "null"]}
_STR_MAP = {"type": "object", "additionalProperties": _STR}


def _closed(required: dict, optional: dict | None = None) -> dict:
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required),
            "additionalProperties": False}


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


_FINDING = _closed({
    "rule": _STR, "layer": _LAYER, "severity": {"enum": ["warn", "fail"]}, "title": _STR,
    "onset": {"type": "integer", "description": "the step the finding began, as every format quotes it: the "
              "change point of a trend, the first sustained crossing of a level, the step of an event"},
    "onset_interval": {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2,
                       "description": "the 95% interval of the onset (the onset twice where it has none)"},
    "start_step": {"type": "integer", "description": "the start of the window the rule read (not the onset)"},
    "end_step": {"type": "integer", "description": "the end of the window the rule read"}, "message": _STR,
    "evidence": {"type": "object", "description": "what the rule's detector measured; keys differ by rule; "
                                                  "NaN and Inf as the strings 'nan', 'inf', '-inf'"},
    "downstream": _BOOL, "explained_by": {"type": ["string", "null"]}, "check_first": _STRS},
    {"downstream_reason": {"type": ["string", "null"], "description": "why a finding is downstream"}})

_LAYER_RESULT = _closed({
    "layer": _LAYER, "status": {"enum": ["pass", "warn", "fail", "unknown", "ignored"]},
    "onset_step": {"type": ["integer", "null"], "description": "the earliest onset of the layer's findings"},
    "unknown_reason": {"enum": ["missing signal", "too little data", None]}, "judged_rules": _STRS,
    "missing_signals": _STRS})

_UNKNOWN = _closed({"rule": _STR, "layer": _LAYER, "kind": {"enum": ["missing signal", "too little data"]},
                    "missing": _STRS, "reason": _STR,
                    "undecided": {"type": "boolean", "description": "a change the size the rule looks for "
                                  "that the data can neither confirm nor rule out: too noisy to tell"}})

_ENDING = _closed({"kind": _STR, "step": _STEP, "message": _STR, "source": _STR},
                  {"planned": {"type": ["integer", "null"], "description": "the steps the run was to train"}})

_FORECAST = _closed({"what": _STR, "signal": _STR, "key": _STR, "now": _NUM, "now_step": _INT, "level": _NUM,
                     "at_step": _INT, "earliest": _INT, "latest": _INT})

_METHOD = _closed({"name": _STR, "layer": _LAYER, "source_key": _STR,
                   "value": {"type": ["string", "number", "boolean", "null"]}})

_COST_PART = {"type": "object", "required": ["hours", "steps"], "properties": {"hours": _NUM, "steps": _NUM}}
_COST = {"anyOf": [
    _closed({"reason": _STR}),
    _closed({"step_seconds": _NUM, "step_seconds_source": _STR, "gpus": {"type": ["integer", "null"]},
             "gpus_source": _STR, "gpu_hour_cost": {"type": ["number", "null"]}},
            {"zero_variance": _COST_PART, "after_root": _COST_PART}),
    {"type": "null"}],
    "description": "the wasted-compute estimate with its inputs, or only the reason there is none"}

_NUM_OR_NULL = {"type": ["number", "null"]}
_SAMPLE_EFFECT = _closed({"feature": _STR, "label": _STR, "share": _BOOL, "high": _NUM_OR_NULL, "low": _NUM_OR_NULL,
                          "early": _NUM_OR_NULL, "late": _NUM_OR_NULL, "z": _NUM_OR_NULL, "p_reward": _NUM_OR_NULL,
                          "p_steps": _NUM_OR_NULL, "named": _BOOL, "text": _STR})
_SAMPLE_EXAMPLE = _closed({"role": {"enum": ["highest reward", "median reward", "early"]}, "step": _INT,
                           "reward": _NUM_OR_NULL, "text": _STR, "where": _STR})
_SAMPLES = _closed({
    "rule": _STR, "layer": _LAYER, "source": _STR, "first_step": _STEP, "last_step": _STEP, "samples": _INT,
    "logged": _INT, "steps": _INT, "headline": _STR,
    "named": {"type": "array", "items": _SAMPLE_EFFECT,
              "description": "features that moved with the reward (layer 1) or rose over the steps (layer 2), "
                             "beyond chance and large"},
    "tested": {"type": "array", "items": _SAMPLE_EFFECT}, "examples": {"type": "array", "items": _SAMPLE_EXAMPLE},
    "not_judged": {"type": ["string", "null"]}, "notes": _STRS})

_RUN = _closed({
    "run": _STR, "verdict": {"enum": ["pass", "warn", "fail", "unknown"]},
    "verdict_text": {"type": "string", "description": "the verdict, what --select/--ignore left out and "
                                                   "the rules too noisy to tell"},
    "root_layer": {"anyOf": [_LAYER, {"type": "null"}]}, "kind": {"enum": ["rl", "sft"]},
    "layers": {"type": "array", "items": _LAYER_RESULT, "minItems": 4, "maxItems": 4},
    "findings": {"type": "array", "items": _FINDING}, "unknown": {"type": "array", "items": _UNKNOWN},
    "signals": _STR_MAP, "signal_sources": _STR_MAP, "guessed": _STR_MAP,
    "framework": {"type": ["string", "null"]}, "ending": _nullable(_ENDING), "cost": _COST,
    "forecasts": {"type": "array", "items": _FORECAST}, "methods": {"type": "array", "items": _METHOD},
    "methods_advice": {"type": ["string", "null"]}, "resumed": _BOOL, "first_nonfinite_step": _STEP,
    "steps": {"anyOf": [{"type": "array", "items": _INT, "minItems": 2, "maxItems": 2}, {"type": "null"}]},
    "notes": _STRS, "ignored": _STRS, "ignored_layers": {"type": "array", "items": _LAYER},
    "ignored_findings": {"type": "array", "items": _FINDING}},
    {"samples": {**_SAMPLES, "description": "what the run's logged samples (completions) show about its lead "
                                            "layer-1 (else layer-2) finding; only for a run that logged them"}})

_SETTING = _closed({"value": {}, "origin": _STR})

_SETTINGS = _closed({"config": {"type": ["string", "null"]}, "changed": _STRS,
                     "values": {"type": "object", "additionalProperties": _SETTING}})

_LAYER_CHANGE = _closed({"layer": _LAYER, "before": _STR, "after": _STR, "change": _STR, "onset_before": _STEP,
                         "onset_after": _STEP, "resolved": _STRS, "new": _STRS, "persisting": _STRS})

_COMPARISON = _closed({
    "baseline": _STR, "run": _STR, "verdict_before": _STR, "verdict_after": _STR,
    "root_before": {"type": ["integer", "null"]}, "root_after": {"type": ["integer", "null"]},
    "acted_on_root": {"type": ["boolean", "null"]}, "summary": _STR,
    "method_changes": {"type": "array", "items": _closed({"change": _STR, "layer": _LAYER})},
    "layers": {"type": "array", "items": _LAYER_CHANGE}})


_SUMMARY = _closed({
    "runs": _INT, "pass": _INT, "warn": _INT, "fail": _INT, "unknown": _INT,
    "verdict": {"enum": ["pass", "warn", "fail", "unknown"],
                "description": "the worst verdict of the runs: fail, else warn, else unknown, else pass"},
    "exit_code": {"type": "integer", "description": "the exit code of the check (0 clean, 1 findings at or above "
                                                    "fail_on, 3 nothing judged), before --exit-zero"},
    "fail_on": {"enum": ["warn", "fail"]}, "allow_unknown": _BOOL})


def check_schema() -> dict:
    """The schema of `stabdiag check --format json` (and `-o FILE.json`)."""
    doc = _closed({"stabdiag_version": _STR, "schema_version": {"const": SCHEMA_VERSION},
                   "summary": _SUMMARY, "runs": {"type": "array", "items": _RUN}},
                  {"settings": _SETTINGS, "comparisons": {"type": "array", "items": _COMPARISON},
                   "not_read": {"type": "array", "items": _closed({"path": _STR, "reason": _STR}),
                                "description": "every path given, and every folder beside the runs, that "
                                               "held nothing readable, with why"}})
    return {"$schema": DRAFT, "$id": f"urn:stabdiag:schema:check:{SCHEMA_VERSION}",
            "title": f"stabdiag check report, schema {SCHEMA_VERSION}", **doc}


_SIGNAL = _closed({"key": _STR, "source": {"type": ["string", "null"]}, "unit": {"type": ["string", "null"]},
                   "guessed": _BOOL, "guess_pattern": {"type": ["string", "null"]}, "points": _INT,
                   "first_step": _STEP, "last_step": _STEP, "nonfinite": _INT})

_SIGNALS_RUN = _closed({"run": _STR, "signals": {"type": "object", "additionalProperties": _SIGNAL},
                        "unmapped": _STRS, "ambiguous": {"type": "object", "additionalProperties": _STRS},
                        "notes": _STRS, "framework": {"type": ["string", "null"]}})


def signals_schema() -> dict:
    """The schema of `stabdiag signals --format json`."""
    doc = _closed({"stabdiag_version": _STR, "schema_version": {"const": SIGNALS_SCHEMA_VERSION},
                   "runs": {"type": "array", "items": _SIGNALS_RUN}})
    return {"$schema": DRAFT, "$id": f"urn:stabdiag:schema:signals:{SIGNALS_SCHEMA_VERSION}",
            "title": f"stabdiag signals report, schema {SIGNALS_SCHEMA_VERSION}", **doc}


SCHEMAS = {"check": check_schema, "signals": signals_schema}


def validate(doc: dict, which: str = "check") -> None:
    """Raise jsonschema.ValidationError when `doc` does not follow the schema (needs jsonschema, in the
    dev extra: a reader's tool, not a runtime dependency)."""
    import jsonschema

    jsonschema.validate(doc, SCHEMAS[which](), cls=jsonschema.Draft202012Validator)
