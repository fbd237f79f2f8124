"""Cold start: which heavy modules the common commands import (issue 14: start in a blink).

`stabdiag check` on a small CSV needs numpy and nothing heavier: no pandas or pyarrow (the CSV reader
parses it), no scipy, no TensorBoard, W&B or protobuf (other formats), no matplotlib or torch.
`stabdiag --version` and `import stabdiag` load no numpy at all.  Each command runs in a fresh
interpreter; a failure names every heavy module imported and the chain of imports that brought it in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

HEAVY = ("pandas", "pyarrow", "scipy", "tensorboard", "wandb", "matplotlib", "torch", "transformers",
         "google.protobuf")

# Runs `python -m stabdiag ARGS` (or a bare import) and prints, as JSON on the last line of stderr, every
# module in `watch` loaded by the end, each with the frames (module:function) that first imported it.
RUNNER = textwrap.dedent("""
    import atexit, json, runpy, sys

    watch = tuple(sys.argv[1].split(","))
    first = {}

    def heavy(name):
        return next((w for w in watch if name == w or name.startswith(w + ".")), None)

    class Spy:
        def find_spec(self, name, path=None, target=None):
            top = heavy(name)
            if top is not None and top not in first:
                frame, chain = sys._getframe(1), []
                while frame is not None:
                    module = frame.f_globals.get("__name__", "?")
                    if not module.startswith(("importlib", "_frozen")) and frame.f_code.co_filename[:1] != "<":
                        chain.append(f"{module}:{frame.f_code.co_name}")
                    frame = frame.f_back
                first[top] = chain[:8]
            return None

    sys.meta_path.insert(0, Spy())

    def report():
        loaded = sorted({h for m in sys.modules if (h := heavy(m)) is not None})
        sys.stderr.write("\\n" + json.dumps({m: first.get(m, []) for m in loaded}) + "\\n")

    atexit.register(report)
    args = sys.argv[2:]
    if args == ["import"]:
        import stabdiag
    else:
        sys.argv = ["stabdiag", *args]
        runpy.run_module("stabdiag", run_name="__main__")
""")


def imported(args: list[str], watch: tuple[str, ...], cwd: Path) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", RUNNER, ",".join(watch), *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def explain(found: dict[str, list[str]]) -> str:
    return "; ".join(f"{module} <- {' <- '.join(chain) or '?'}" for module, chain in found.items())


def small_csv(folder: Path) -> Path:
    names = ["reward", "kl", "entropy", "grad_norm", "loss", "response_length", "lr", "eval_acc", "clip_frac"]
    rows = [",".join(["step", *names])]
    rows += [",".join([str(s), *(f"{((s * 7 + i * 13) % 97) / 97:.4f}" for i in range(len(names)))])
             for s in range(200)]
    path = folder / "small.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_check_of_a_small_csv_imports_nothing_heavy(tmp_path):
    path = small_csv(tmp_path)
    found = imported(["check", str(path)], HEAVY, tmp_path)
    assert not found, "check of a CSV imported " + explain(found)


def test_check_of_a_small_csv_in_json_imports_nothing_heavy(tmp_path):
    path = small_csv(tmp_path)
    found = imported(["check", str(path), "--format", "json"], HEAVY, tmp_path)
    assert not found, "check --format json of a CSV imported " + explain(found)


def test_version_and_import_load_no_numpy(tmp_path):
    for args in (["--version"], ["import"]):
        found = imported(args, ("numpy", *HEAVY), tmp_path)
        assert not found, f"{' '.join(args)} imported " + explain(found)


def test_version_answers_before_the_cli_is_built(tmp_path):
    # `stabdiag --version` is the app's eager option, said by stabdiag.cli.main before typer loads (issue 42:
    # at most 3x Python's own start); the other commands' modules stay out of a check
    found = imported(["--version"], ("typer", "click", "rich", "stabdiag.cli._app"), tmp_path)
    assert not found, "--version imported " + explain(found)
    path = small_csv(tmp_path)
    others = ("stabdiag.cli.plot", "stabdiag.cli.signals", "stabdiag.cli.samples", "stabdiag.cli.watch",
              "stabdiag.cli.rules", "stabdiag.cli.methods", "stabdiag.probe")
    found = imported(["check", str(path)], others, tmp_path)
    assert not found, "check imported " + explain(found)


# What a CSV does not need, each a few ms of a cold start: the other formats' readers (the console readers'
# regexes and a console's ending, sqlite3 for MLflow, html.parser for notebooks), tomllib (the shipped
# checklist comes from its cache, and a pyproject.toml with no [tool.stabdiag] is not parsed), rich's emoji
# table.
NOT_FOR_A_CSV = ("stabdiag.read.formats.text", "stabdiag.read.formats.trainer_state", "stabdiag.read.ending.console",
                 "sqlite3", "html.parser", "tomllib", "rich._emoji_codes", "stabdiag.advise.nightly",
                 "stabdiag.read.samples", "stabdiag.advise.samples")


def test_check_of_a_small_csv_reads_no_other_format_code(tmp_path):
    path = small_csv(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trainer"\n', encoding="utf-8")
    imported(["check", str(path)], NOT_FOR_A_CSV, tmp_path)       # the first run may write the cache
    found = imported(["check", str(path)], NOT_FOR_A_CSV, tmp_path)
    assert not found, "check of a CSV imported " + explain(found)
