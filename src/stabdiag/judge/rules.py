"""The checklist as data: parse and validate rule files into Rule objects.

A rule names its detector and wires detector arguments to canonical signals; anything the parser does
not understand is refused with the file, the line and the rule id (semgrep's schema, ruff's config).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .. import _toml
from ..errors import RuleError
from ..signals.resolve import AliasTable, default_alias_table
from .budget import describe, share_of
from .detectors import DETECTORS, DetectorSpec

LAYER_NAMES = {1: "data & reward", 2: "policy change", 3: "numeric update", 4: "training system"}
SEVERITIES = ("warn", "fail")
STATUSES = ("preview", "stable", "deprecated", "removed")
_ID = re.compile(r"^L([1-4])\.[a-z0-9]+(-[a-z0-9]+)*$")
_REQUIRED = ("id", "layer", "title", "severity", "status", "since", "detector", "message", "why",
             "check_first", "references", "signals", "example")
_OPTIONAL = ("optional_signals", "params", "known_limits", "aliases", "requires", "check_first_sft",
             "check_first_hardware", "consequence_of", "clean_passes_layer")
EVAL_ANY = "eval:*"
REWARD_COMPONENTS = "reward:*"
FAMILIES = (EVAL_ANY, REWARD_COMPONENTS)     # wirings that stand for every signal of a family
RUN_INPUTS = ("ending", "config")            # run-level facts, not series: how the run ended, its settings
DATA_FILES = ("signals.toml", "name_patterns.toml", "methods.toml")   # TOML files that hold no rules
# the shipped rule files (a plain path: importlib.resources costs a start-up for nothing)
CHECKLIST = Path(__file__).with_name("checklist")


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of the four-layer list, as written in its rule file."""

    id: str
    layer: int
    title: str
    severity: str
    status: str
    since: str
    detector: str
    message: str
    why: str
    check_first: tuple[str, ...]
    references: tuple[str, ...]
    signals: dict[str, str]
    optional_signals: dict[str, str]
    params: dict[str, float]          # every parameter the detector declares: the rule file's values
    example_fires: str
    example_quiet: str
    requires: str = "all"             # "all" signals present, "any" one of them, or an "event" rule that
                                      # only ever reports (never judges a layer clean, never unknown)
    known_limits: str = ""
    aliases: tuple[str, ...] = ()
    check_first_sft: tuple[str, ...] = ()   # the advice for SFT / pretraining runs, where it differs
    check_first_hardware: tuple[str, ...] = ()   # ... for a run that died of a GPU hardware fault (ECC, Xid)
    consequence_of: tuple[str, ...] = ()    # rules whose earlier finding explains this one's
    clean_passes_layer: bool = True         # false: judged clean it passes its layer only beside another
                                            # rule that judged it (an eval that did not fall says nothing of
                                            # a reward that rose)
    source: str = field(default="", compare=False)

    @property
    def spec(self) -> DetectorSpec:
        return DETECTORS[self.detector]

    def advice(self, kind: str, ending: str | None = None) -> tuple[str, ...]:
        """What to check first on a run of this kind ("rl" or "sft") that ended so (the kind of its
        `ending`: "hardware" for a GPU fault, whose checks are the node's, not the training code's)."""
        if ending == "hardware" and self.check_first_hardware:
            return self.check_first_hardware
        return self.check_first_sft if kind == "sft" and self.check_first_sft else self.check_first

    def checks(self) -> str:
        """What the rule checks, in words: its detector's docstring (first paragraph), each `parameter`
        quoted there given this rule's value ("min_rise_z (3)") and each `curve` named by the signal wired
        to it.  Generated, so it says what the code does, with the values in force."""
        wiring = {**self.signals, **self.optional_signals}

        def named(match: re.Match) -> str:
            word = match.group(1)
            if word in self.params:
                return f"{word} ({self.params[word]:g})"
            return wiring.get(word, word)

        summary = self.spec.summary()
        return _QUOTED.sub(named, summary) if summary else "(not available: Python runs with -OO, which strips " \
            "the detector docstrings it is read from)"

    def parameters(self) -> list[dict]:
        """Every parameter the detector declares, with this rule's value, in the detector's order."""
        return [{"name": p.name, "value": self.params[p.name], "low": p.low, "high": p.high, "meaning": p.meaning,
                 "role": p.role, "off": p.is_off(self.params[p.name])} for p in self.spec.params]

    def explain(self) -> str:
        """The rule's documentation, built only from its block and its detector's declaration."""
        steps = "\n".join(f"                 {i}. {s}" for i, s in enumerate(self.check_first, 1)).lstrip()
        wiring = ", ".join(f"{arg} = {sig}" for arg, sig in {**self.signals, **self.optional_signals}.items())
        params = "\n".join(f"                 {_param_line(p)}" for p in self.parameters()).lstrip() or "none"
        lines = [
            f"{self.id}: {self.title}",
            f"layer {self.layer} ({LAYER_NAMES[self.layer]}) | {self.severity} | {self.status} since "
            f"{self.since} | detector {self.detector}",
            f"What it checks   {self.checks()}",
            f"Signals          {wiring}",
            f"Parameters       {params}",
            f"Why it matters   {' '.join(self.why.split())}",
            f"Check first      {steps}",
            f"Example          fires: {self.example_fires}",
            f"                 quiet: {self.example_quiet}",
            f"Known limits     {' '.join(self.known_limits.split()) or 'none recorded'}",
            f"References       {'; '.join(self.references)}",
        ]
        if self.false_alarms():
            lines.insert(5, f"False alarms     {self.false_alarms()}")
        lines.insert(5, f"Budget share     {self.budget_share()}")
        return "\n".join(lines)

    def budget_share(self) -> str:
        """The share of the verdict's false-alarm budget this rule's sureness declares (judge/budget.py), or
        that it makes no sureness claim (a level rule, whose rate is measured only)."""
        share = share_of(self.id, self.severity, self.params)
        if share is None:
            return "none declared: a level rule, no sureness claim (its rate is measured: bench/calibrate.py)"
        return describe(share)

    def false_alarms(self) -> str:
        """For an event rule with a per-run false-alarm budget (`run_alpha`, issue 43 item 5): the false alarms it
        implies per 10,000 steps on healthy runs of a few lengths; "" for other rules.  The
        budget is per run, so the rate per step falls as the run grows (the bar grows with its points)."""
        alpha = self.params.get("run_alpha")
        if alpha is None:
            return ""
        rates = ", ".join(f"{alpha * 10_000 / n:.2g} on a {n:,}-step run" for n in (1_000, 10_000, 100_000))
        return (f"a healthy run raises one with chance at most {alpha:g} (run_alpha), whatever its length: per "
                f"10,000 steps, {rates}")

    def to_dict(self) -> dict:
        """The same fields as explain(), for `rules explain --format json` and `rules list --format json`."""
        return {"id": self.id, "layer": self.layer, "title": self.title, "severity": self.severity,
                "status": self.status, "since": self.since, "detector": self.detector,
                "checks": self.checks(), "signals": self.signals,
                "optional_signals": self.optional_signals, "params": dict(self.params),
                "parameters": self.parameters(),
                "why": " ".join(self.why.split()), "check_first": list(self.check_first),
                "example": {"fires": self.example_fires, "quiet": self.example_quiet},
                "known_limits": self.known_limits, "false_alarms": self.false_alarms(),
                "budget_share": self.budget_share(),
                "references": list(self.references),
                "aliases": list(self.aliases)}


_QUOTED = re.compile(r"`([^`]+)`")      # a name quoted in a detector's docstring: a parameter or a curve


def _param_line(p: dict) -> str:
    role = "bounds the work, never the verdict; " if p["role"] == "bounds" else \
        "words the finding, never the verdict; " if p["role"] == "words" else \
        "switched off here: decides nothing; " if p["off"] else ""
    return f"{p['name']} = {p['value']:g} - {p['meaning']} [{role}allowed {p['low']:g}..{p['high']:g}]"


def _validate(body: dict, path: str, text: str, table: AliasTable) -> Rule:
    rid = body.get("id")

    def fail(problem: str, needle: str | None = None, after: str | None = None) -> RuleError:
        # the lines are looked up only for an error: scanning the file for every rule costs each start-up;
        # `after`: a line of the rule's block (its [rule.params]) to search for `needle` from
        line = _toml.line_of(text, f'"{rid}"') if isinstance(rid, str) else None
        end = _toml.line_of(text, "[[rule]]", (line or 1) + 1) or len(text.splitlines()) + 1

        def inside(found: int | None) -> int | None:      # a line of this rule's block, not of a later one
            return found if found is not None and found < end else None

        start = (inside(_toml.line_of(text, after, line or 1)) if after else None) or line or 1
        where = inside(_toml.line_of(text, needle, start)) if needle else line
        return RuleError(path, problem, line=where or line, rule_id=rid if isinstance(rid, str) else None)

    for key in body:
        if key not in _REQUIRED and key not in _OPTIONAL:
            close = difflib.get_close_matches(key, _REQUIRED + _OPTIONAL, n=1)
            raise fail(f"unknown key '{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""), key)
    for key in _REQUIRED:
        if key not in body or body[key] in ("", [], {}):
            raise fail(f"missing or empty '{key}'")
    if not isinstance(rid, str) or not _ID.match(rid):
        raise fail(f"id {rid!r} must look like L<layer>.kebab-case-symptom")
    if body["layer"] != int(rid[1]):
        raise fail(f"layer {body['layer']} does not match the id's L{rid[1]}", "layer")
    if len(body["title"]) > 70:
        raise fail("title is longer than 70 characters", "title")
    if body["severity"] not in SEVERITIES:
        raise fail(f"severity must be one of {', '.join(SEVERITIES)}; got {body['severity']!r}", "severity")
    if body["status"] not in STATUSES:
        raise fail(f"status must be one of {', '.join(STATUSES)}; got {body['status']!r}", "status")
    if body["detector"] not in DETECTORS:
        close = difflib.get_close_matches(body["detector"], list(DETECTORS), n=1)
        raise fail(f"unknown detector '{body['detector']}'" + (f" (did you mean '{close[0]}'?)" if close else ""),
                   "detector")
    spec = DETECTORS[body["detector"]]
    params = _check_params(spec, body, fail)
    optional = body.get("optional_signals", {})
    for wiring in (body["signals"], optional):
        for signal in wiring.values():
            if signal not in FAMILIES and signal not in RUN_INPUTS and not table.is_known(signal):
                raise fail(f"unknown signal '{signal}' (not in signals.toml)", signal)
    for key in ("check_first_sft", "check_first_hardware", "consequence_of"):
        if not isinstance(body.get(key, []), list):
            raise fail(f"{key} must be a list", key)
    _check_contract(spec, body, optional, fail)
    example = body["example"]
    if not example.get("fires") or not example.get("quiet"):
        raise fail("example needs both 'fires' and 'quiet'", "example")
    if not 2 <= len(body["check_first"]) <= 5:
        raise fail("check_first needs 2 to 5 steps", "check_first")
    if not isinstance(body.get("clean_passes_layer", True), bool):
        raise fail("clean_passes_layer must be true or false", "clean_passes_layer")
    requires = body.get("requires", "all")
    if requires not in ("all", "any", "event"):
        raise fail(f"requires must be 'all', 'any' or 'event'; got {requires!r}", "requires")
    return Rule(
        id=rid, layer=int(body["layer"]), title=body["title"], severity=body["severity"],
        status=body["status"], since=str(body["since"]), detector=body["detector"],
        message=body["message"], why=body["why"], check_first=tuple(body["check_first"]),
        references=tuple(body["references"]), signals=dict(body["signals"]),
        optional_signals=dict(optional), params=params,
        example_fires=example["fires"], example_quiet=example["quiet"], requires=requires,
        known_limits=body.get("known_limits", ""), aliases=tuple(body.get("aliases", ())),
        check_first_sft=tuple(body.get("check_first_sft", ())),
        check_first_hardware=tuple(body.get("check_first_hardware", ())),
        consequence_of=tuple(body.get("consequence_of", ())),
        clean_passes_layer=body.get("clean_passes_layer", True), source=path)


def _check_params(spec: DetectorSpec, body: dict, fail) -> dict[str, float]:
    """The rule's `[rule.params]` against its detector's declaration: a value for every parameter the
    detector declares, none it does not, each a number in its range.  Values live only here (the
    detector declares none), so a rule that leaves one out is refused, not filled in.  Returns them in
    the detector's order."""
    given = body.get("params", {})
    if not isinstance(given, dict):
        raise fail("params must be a table of NAME = number", "params")
    declared = {p.name: p for p in spec.params}
    for name, value in given.items():
        if name not in declared:
            close = difflib.get_close_matches(name, list(declared), n=1)
            raise fail(f"detector {spec.name} has no parameter '{name}'"
                       + (f"; did you mean '{close[0]}'?" if close else "")
                       + f" (it has: {', '.join(declared) or 'none'})", name, after="[rule.params]")
        p = declared[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(f"parameter {name}: expected a number; got {value!r}", name, after="[rule.params]")
        if not p.low <= value <= p.high:
            raise fail(f"parameter {name} = {value!r} is outside [{p.low:g}, {p.high:g}] ({p.meaning})", name,
                       after="[rule.params]")
    missing = [name for name in declared if name not in given]
    if missing:
        raise fail(f"[rule.params] leaves out {', '.join(missing)}: detector {spec.name} declares "
                   f"{'it' if len(missing) == 1 else 'them'}, and every rule gives the value of each (values "
                   "live only in rule files)", "[rule.params]" if "params" in body else None)
    return {name: float(given[name]) for name in declared}


# fields every finding's message may quote besides its detector's evidence (the engine adds them)
_ENGINE_FIELDS = frozenset({"start", "end", "onset", "onset_low", "onset_high", "change_step"})


def _check_contract(spec: DetectorSpec, body: dict, optional: dict, fail) -> None:
    """The rule against its detector's contract: every wired argument is one the detector takes, every
    curve it needs is wired, and the message quotes only fields its evidence has (issue 24: a typo there
    was an "internal error", or a "{field}" left in the text, at run time)."""
    inputs = spec.inputs()
    required, takes_optional = inputs if inputs is not None else ((), ())
    takes = set(required) | set(takes_optional)
    for wiring in (body["signals"], optional) if inputs is not None else ():
        for arg in wiring:
            if arg not in takes:
                close = difflib.get_close_matches(arg, sorted(takes), n=1)
                raise fail(f"detector {spec.name} takes no curve '{arg}' (it takes: {', '.join(sorted(takes))})"
                           + (f"; did you mean '{close[0]}'?" if close else ""), arg)
    unwired = [a for a in required if a not in body["signals"]]
    if unwired and body.get("requires", "all") != "any":
        raise fail(f"detector {spec.name} needs curve(s) {', '.join(unwired)} wired under signals", "signals")
    if spec.evidence:
        import string
        fields = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(body["message"])
                  if name}
        unknown = sorted(fields - set(spec.evidence) - _ENGINE_FIELDS)
        if unknown:
            close = difflib.get_close_matches(unknown[0], spec.evidence, n=1)
            raise fail(f"message quotes {', '.join(unknown)}, which detector {spec.name} does not return (it "
                       f"returns: {', '.join(spec.evidence)})" + (f"; did you mean '{close[0]}'?" if close else ""),
                       "message")


def parse_rule_file(text: str, path: str, table: AliasTable | None = None, *,
                    shipped: Path | None = None) -> list[Rule]:
    """The rules of one file; `path` names it in errors, `shipped` is where a shipped file lies (its parse
    is cached beside it)."""
    table = table or default_alias_table()
    try:
        data = _toml.loads(text, str(shipped) if shipped is not None else None)
    except _toml.TOMLDecodeError as exc:
        raise RuleError(path, f"not valid TOML: {exc}") from None
    unknown = set(data) - {"rule"}
    if unknown:
        key = sorted(unknown)[0]
        raise RuleError(path, f"unknown top-level key '{key}' (rule files hold [[rule]] blocks)",
                        line=_toml.line_of(text, key))
    return [_validate(body, path, text, table) for body in data.get("rule", [])]


def _check_unique(rules: list[Rule]) -> None:
    seen: dict[str, Rule] = {}
    for rule in rules:
        for name in (rule.id, *rule.aliases):
            if name in seen:
                raise RuleError(rule.source, f"duplicate rule id '{name}' (also in {seen[name].source})",
                                rule_id=rule.id)
            seen[name] = rule
    for rule in rules:
        for cause in rule.consequence_of:
            if cause not in seen:
                close = difflib.get_close_matches(cause, list(seen), n=1)
                raise RuleError(rule.source, f"rule {rule.id}: consequence_of names no rule '{cause}'"
                                + (f" (did you mean '{close[0]}'?)" if close else ""), rule_id=rule.id,
                                line=_line_in(rule.source, cause))


def _line_in(path: str, needle: str) -> int | None:
    """The line of `needle` in a rule file, for an error found after parsing (shipped files may be in a
    wheel: then no line)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return _toml.line_of(fh.read(), needle)
    except OSError:
        return None


def load_rules(extra_dirs: list[str | os.PathLike[str]] | None = None) -> tuple[Rule, ...]:
    """The shipped rules plus any from extra directories, ordered by layer then id."""
    rules = list(_shipped_rules())
    for directory in extra_dirs or []:
        path = Path(directory)
        if not path.is_dir():
            raise RuleError(str(path), "rules directory not found")
        for file in sorted(path.glob("*.toml")):
            if file.name not in DATA_FILES:
                try:
                    text = file.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise RuleError(str(file), f"cannot read the rule file ({getattr(exc, 'strerror', None) or exc})"
                                    ) from None
                rules.extend(parse_rule_file(text, str(file)))
    _check_unique(rules)
    return tuple(sorted(rules, key=lambda r: r.layer))   # stable: file order within a layer


@lru_cache(maxsize=1)
def _shipped_rules() -> tuple[Rule, ...]:
    folder = CHECKLIST
    rules: list[Rule] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml") and entry.name not in DATA_FILES:
            rules.extend(parse_rule_file(entry.read_text(encoding="utf-8"), f"checklist/{entry.name}",
                                         shipped=entry))
    return tuple(rules)


def get_rule(rule_id: str, rules: tuple[Rule, ...] | None = None) -> Rule:
    """A rule by id or alias; an unknown id is a RuleError suggesting close ids."""
    rules = rules if rules is not None else load_rules()
    for rule in rules:
        if rule_id == rule.id or rule_id in rule.aliases:
            return rule
    close = difflib.get_close_matches(rule_id, [r.id for r in rules], n=1)
    raise RuleError("rules", f"no rule '{rule_id}'" + (f" (did you mean '{close[0]}'?)" if close else ""))


def select_rules(rules: tuple[Rule, ...], select: list[str] | None = None,
                 ignore: list[str] | None = None) -> tuple[Rule, ...]:
    """Rules whose id (or alias) starts with a --select prefix and with no --ignore prefix."""
    def hits(rule: Rule, prefixes: list[str]) -> bool:
        return any(name == p or name.startswith(p + ".") or (p.startswith("L") and p[1:].isdigit()
                   and name.startswith(p + ".")) for p in prefixes for name in (rule.id, *rule.aliases))
    chosen = [r for r in rules if r.status != "removed"]
    if select:
        chosen = [r for r in chosen if hits(r, select)]
    if ignore:
        chosen = [r for r in chosen if not hits(r, ignore)]
    return tuple(chosen)
