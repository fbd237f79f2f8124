"""The baseline comparison (`stabdiag check --baseline`) in each format that shows it: a plain-text block
for the terminal, a Markdown section, one `::notice` for GitHub (JSON carries `Comparison.to_dict()`).

Run names, rule ids and config values come from the data, so each goes through the format's function of
report._escape, as in every other reporter: a run folder named `x\\n::error::forged` is one visible line.
"""

from __future__ import annotations

from ..judge.rules import LAYER_NAMES
from ._escape import markdown_code, markdown_text, visible


def _root(layer: int | None) -> str:
    return "none" if layer is None else f"layer {layer}"


def _step(step: int | None) -> str:
    return "-" if step is None else str(step)


def text(c) -> str:
    """A plain-text block: a headline, one row per layer, and the verdict on the fix."""
    lines = [f"Baseline {visible(c.baseline)} -> {visible(c.run)}: {c.verdict_before} -> {c.verdict_after}, "
             f"root {_root(c.root_before)} -> {_root(c.root_after)}"]
    for change in c.layers:
        onset = f"onset {_step(change.onset_before)} -> {_step(change.onset_after)}"
        rules = "; ".join(part for part in (
            "resolved " + ", ".join(map(visible, change.resolved)) if change.resolved else "",
            "new " + ", ".join(map(visible, change.new)) if change.new else "",
            "still " + ", ".join(map(visible, change.persisting)) if change.persisting else "") if part)
        lines.append(f"  {change.layer} {LAYER_NAMES[change.layer]:<16} {change.before:>7} -> {change.after:<7} "
                     f"{change.change:<14} {onset}" + (f"  {rules}" if rules else ""))
    for what, layer in c.method_changes:
        lines.append(f"  config: {visible(what)} - acts on layer {layer} ({LAYER_NAMES[layer]})")
    lines.append(f"  {visible(c.summary)}")
    return "\n".join(lines) + "\n"


def markdown(c) -> str:
    """A `###` section: the summary in bold and one table row per layer."""
    lines = [f"### Baseline {markdown_code(c.baseline)} -> {markdown_code(c.run)}", "",
             f"**{markdown_text(c.summary, in_table=False)}**", "",
             "| layer | before | after | change | onset | resolved | new |", "|---|---|---|---|---|---|---|"]
    for change in c.layers:
        resolved = ", ".join(markdown_text(r) for r in change.resolved)
        new = ", ".join(markdown_text(r) for r in change.new)
        lines.append(f"| {change.layer} {LAYER_NAMES[change.layer]} | {change.before} | {change.after} | "
                     f"{change.change} | {_step(change.onset_before)} -> {_step(change.onset_after)} | "
                     f"{resolved} | {new} |")
    return "\n".join(lines) + "\n"


def github(c) -> str:
    """One `::notice` annotation line with the summary, titled with both run names."""
    from .github import command

    return command("notice", visible(c.summary), title=f"stabdiag baseline {c.baseline} -> {c.run}") + "\n"
