"""The live status table of `stabdiag watch` in a terminal: one row per run (last step, verdict, root
layer, findings), redrawn in place under the event lines (rich's Live; only when stdout is a TTY and the
format is text, so that piped output stays one line per event)."""

from __future__ import annotations

from ...judge.diagnosis import Diagnosis


def status_table(diagnoses: dict[str, Diagnosis]):
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("run", "step", "verdict", "root", "findings"):
        table.add_column(column)
    for name, diag in sorted(diagnoses.items()):
        worst = ", ".join(f"{f.rule} ({f.severity})" for f in diag.findings if not f.downstream)
        table.add_row(name, str(diag.steps[1]) if diag.steps else "-", diag.verdict,
                      f"layer {diag.root_layer}" if diag.root_layer else "-", worst or "-")
    return table


class LiveStatus:
    """Event lines printed above a table redrawn in place."""

    def __init__(self, out) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=out)
        self.live = Live(console=self.console, auto_refresh=False, transient=True)

    def __enter__(self) -> LiveStatus:
        self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        self.live.stop()

    def print(self, line: str) -> None:
        """An event line wrapped at whole words to the terminal's width, its later lines indented: the
        terminal would otherwise break it mid-number at its margin."""
        import textwrap

        width = max(40, self.console.width)
        text = textwrap.fill(line, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
        self.live.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def update(self, diagnoses: dict[str, Diagnosis]) -> None:
        if diagnoses:
            self.live.update(status_table(diagnoses), refresh=True)
