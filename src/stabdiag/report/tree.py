"""What every format says the same way about a check of several runs: the order they are read in (failures
first), the count line, which runs are folded into it, the run names shortened to a width so that they
stay distinct, and what each run's unjudged layers lack, grouped only across runs that lack the same.

A nightly of 100 runs has 3 that need a reader; the other 97 must not push them off the first screen
nor off a CI platform's limits, so every reporter orders and folds with these functions.
"""

from __future__ import annotations

import os
from collections import Counter

from ..judge.diagnosis import VERDICTS, Diagnosis, LayerResult, Status, summary
from ..signals.resolve import default_alias_table

ELLIPSIS = "…"


def ordered(diagnoses) -> list[Diagnosis]:
    """The runs failures first: fail, warn, unknown, then pass; by name within each verdict."""
    rank = {v: i for i, v in enumerate(VERDICTS)}
    return sorted(diagnoses, key=lambda d: (rank[d.verdict], d.run))


def count_line(diagnoses, fail_on: str = "fail", *, allow_unknown: bool = False) -> str:
    """"100 runs: 3 fail, 3 warn, 3 unknown, 91 pass" (the verdicts present, worst first)."""
    counts = summary(diagnoses, fail_on, allow_unknown=allow_unknown)
    parts = [f"{counts[v]} {v}" for v in VERDICTS if counts[v]]
    noun = "run" if len(diagnoses) == 1 else "runs"
    return f"{len(diagnoses)} {noun}: " + (", ".join(parts) if parts else "none")


def needs_reading(diag: Diagnosis) -> bool:
    """A run a reader must look at: not a plain pass (a pass with rules too noisy to tell, or whose
    ignored rules would fire, is still a pass here: its table line says so)."""
    return diag.verdict != "pass"


def lead_said(diag: Diagnosis) -> str:
    """The lead rule as a row of runs names it: "L3.nonfinite-values (from 312)" where the lead began after
    its layer's onset (the row's onset column is the layer's, its earliest finding's), else the rule alone;
    "" without a root."""
    lead = diag.root_lead
    if lead is None:
        return ""
    return lead.rule if lead.onset in (None, diag.root_onset) else f"{lead.rule} (from {lead.onset})"


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle with an ellipsis (the end of a run or
    signal name tells runs apart as often as its start)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + ELLIPSIS + text[len(text) - tail:]


def shorten_all(names: list[str], width: int) -> dict[str, str]:
    """Each name in at most `width` characters, cut in the middle, all of them still distinct: where a
    middle cut makes two alike, the cut moves (more of the end kept, then more of the start), and a
    name that no cut of that width keeps apart is shown whole."""
    out: dict[str, str] = {}
    long = [n for n in dict.fromkeys(names) if len(n) > width]
    for n in names:
        if len(n) <= width:
            out[n] = n
    if not long or width < 3:
        return {**out, **{n: n for n in long}}
    keep = width - 1
    splits = sorted(range(1, keep), key=lambda head: abs(head - (keep - keep // 2)))   # the middle first
    taken = set(out.values())
    for name in long:
        for head in splits:
            cut = name[:head] + ELLIPSIS + name[len(name) - (keep - head):]
            clashes = [m for m in long if m != name and m[:head] == name[:head]
                       and m[len(m) - (keep - head):] == name[len(name) - (keep - head):]]
            if cut not in taken and not clashes:
                out[name] = cut
                taken.add(cut)
                break
        else:
            out[name] = name
            taken.add(name)
    return out


def lacks(result: LayerResult, diag: Diagnosis | None = None) -> str:
    """What an unjudged layer lacks, as a user can act on it: the data that was too short, else the signals
    to start logging, the ones most of its rules read first ("loss (5 rules), grad_norm (3); also read:
    lr, reward"), never a flat list where `reward` stands before `loss` in the numeric layer."""
    if any(u.kind == "too little data" for u in result.not_judged):
        return result.not_judged_text()
    # the engine keeps only the rules a run of its kind can feed, and the signals that fit it: an SFT or
    # pretraining run is never told to log a reward or a KL
    kind = diag.kind if diag is not None else "rl"
    fits = default_alias_table().fits
    wanted = [s for u in result.not_judged for s in u.missing if fits(s, kind)]
    counts = Counter(wanted)
    if not counts:
        rl_only = [] if diag is None else list(dict.fromkeys(
            s for u in diag.unknown if u.layer == result.layer for s in u.missing if not fits(s, kind)))
        if rl_only:
            return (f"nothing an SFT/pretraining run logs: its rules read an RL run's {', '.join(rl_only[:4])}"
                    + (f" and {len(rl_only) - 4} more" if len(rl_only) > 4 else ""))
        return result.not_judged_text()
    first_seen = {s: i for i, s in enumerate(dict.fromkeys(wanted))}
    ranked = sorted(counts, key=lambda s: (-counts[s], first_seen[s]))
    many = [s for s in ranked if counts[s] > 1]
    one = [s for s in ranked if counts[s] == 1]
    if many:
        text = "start logging " + ", ".join(f"{s} ({counts[s]} rules)" for s in many)
        text += f"; also read: {', '.join(one)}" if one else ""
    else:
        text = "start logging " + ", ".join(one)
    if diag is not None and result.layer == 3 and "loss" in counts and "eval_loss" in diag.signals:
        text += (f" (the run logs {diag.signals['eval_loss']}, read as the held-out loss in layer 1; "
                 "this layer reads the training loss)")
    return text


def lacking(diag: Diagnosis) -> tuple[tuple[int, str, str], ...]:
    """The run's unjudged layers: (layer, why, what it lacks), the key runs are grouped by."""
    return tuple((r.layer, r.unknown_reason or "", lacks(r, diag)) for r in diag.layers
                 if r.status is Status.UNKNOWN)


def lacking_groups(diagnoses) -> list[tuple[list[Diagnosis], tuple[int, str, str]]]:
    """Each unjudged layer's lack with the runs that lack exactly that, by layer, the largest group
    first: 44 modded-nanogpt logs that lack the same training loss are one line, and a run whose layer
    lacks something else is its own line (never one list of every run's missing signals)."""
    groups: dict[tuple[int, str, str], list[Diagnosis]] = {}
    for d in diagnoses:
        for key in lacking(d):
            groups.setdefault(key, []).append(d)
    return sorted(((runs, key) for key, runs in groups.items()), key=lambda g: (g[1][0], -len(g[0]), g[0][0].run))


def who(runs: list[Diagnosis], everyone: list[Diagnosis], names: dict[str, str] | None = None) -> str:
    """The runs of a group as a reader takes them in: "all 6 runs", two names, or "44 runs"."""
    names = names or {}
    if len(runs) == len(everyone) and len(runs) > 1:
        return f"all {len(runs)} runs"
    if len(runs) <= 2:
        return ", ".join(names.get(d.run, d.run) for d in runs)
    members = {id(d) for d in runs}
    others = [d for d in everyone if id(d) not in members]
    if len(others) <= 2:
        return "all but " + ", ".join(names.get(d.run, d.run) for d in others)
    folders = {d.run.split("/", 1)[0] for d in runs if "/" in d.run}
    if len(folders) == 1 and all("/" in d.run for d in runs):
        return f"{len(runs)} runs under {folders.pop()}/"
    return f"{len(runs)} runs, e.g. {names.get(runs[0].run, runs[0].run)}"



def source(diag: Diagnosis) -> str:
    """The run's first source as a path relative to the working directory (the repository root in CI),
    so that an annotation or a `path:step:` line links to the file; empty for online runs."""
    if not diag.sources or "://" in diag.sources[0]:
        return ""
    path = diag.sources[0]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
