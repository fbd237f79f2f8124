"""The bulk readers of big tables (pyarrow's CSV parser, JSON Lines in blocks, Parquet by column) give the
same series, notes and errors (with the line) as reading the file cell by cell, and a check of a small CSV
or JSONL imports neither pyarrow nor pandas."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stabdiag.errors import InputError
from stabdiag.read.formats import tabular
from stabdiag.read.formats.tabular import _csv, _csv_bulk, _jsonl
from stabdiag.read.formats.tabular._columns import Column, Table, lines_from
from stabdiag.read.formats.tabular._jsonl import _flat

pytest.importorskip("pyarrow")


def outcome(path, **options):
    """What loading a file gives, in a form to compare: the series (steps, values, superseded), notes and
    meta, or the error with its line."""
    try:
        run = tabular.load(str(path), **options)
    except InputError as exc:
        return ("error", str(exc), exc.line)
    series = {k: (s.steps.tolist(), s.values.tobytes(), s.superseded_steps.tolist(), s.superseded_values.tobytes(),
                  None if s.wall_time is None else s.wall_time.tobytes(), s.stepped_back)
              for k, s in run.series.items()}
    return ("run", list(run.series), series, run.notes, run.meta)


def both_csv_paths(monkeypatch, path, **options):
    """(cell by cell, bulk) outcomes of one file, and whether the bulk reader answered (not handed back)."""
    monkeypatch.setattr(_csv, "BULK_BYTES", 1 << 60)
    by_cell = outcome(path, **options)
    monkeypatch.setattr(_csv, "BULK_BYTES", 0)
    answered = []
    real = _csv_bulk.read

    def spy(*args, **kwargs):
        table = real(*args, **kwargs)
        answered.append(table is not None)
        return table

    monkeypatch.setattr(_csv_bulk, "read", spy)
    in_bulk = outcome(path, **options)
    return by_cell, in_bulk, answered == [True]


def wide(rows: int, cells) -> str:
    return "step,loss,reward\n" + "".join(f"{s},{cells(s)},{0.5 + s / 100}\n" for s in range(1, rows + 1))


CSV_CASES = {
    # name: (text, the bulk reader answers itself)
    "plain": (wide(300, lambda s: 1.0 / s), True),
    "sparse eval": ("step,loss,eval/acc\n" + "".join(f"{s},{s / 7},{'' if s % 20 else 0.4}\n" for s in range(1, 201)),
                    True),
    "nan and inf words": (wide(50, lambda s: ["nan", "NaN", "-inf", "Infinity", "+nan", " 1.5 "][s % 6]), True),
    "nan( is junk": (wide(50, lambda s: "nan(1)" if s == 40 else "1.0"), True),
    "nan with a paren elsewhere": ("step,loss,name\n" + "".join(f"{s},{'nan' if s % 3 else 1},r(1)\n"
                                                                 for s in range(1, 60)), True),
    "overflow": (wide(40, lambda s: "1e400" if s in (7, 30) else "-1E999" if s == 9 else "inf"), True),
    "junk late": (wide(3000, lambda s: "oops" if s == 2900 else s), True),
    "junk first": (wide(30, lambda s: "oops" if s == 1 else s), True),
    "blank cells": (wide(30, lambda s: "  " if s % 4 == 0 else s), True),
    "text column": ("step,loss,run\n" + "".join(f"{s},{s},run-{s % 3}\n" for s in range(1, 40)), True),
    "text column of dates": ("step,loss,when\n" + "".join(f"{s},{s},2024-01-{s % 28 + 1:02d}\n"
                                                           for s in range(1, 40)), True),
    "numbers as words later": (wide(3000, lambda s: "1_000" if s > 2500 else s), True),
    "unicode digits": (wide(30, lambda s: "\u0663" if s == 5 else s), True),
    "float steps": ("step,loss\n" + "".join(f"{s}.0,{s}\n" for s in range(1, 40)), True),
    "fractional step": ("step,loss\n" + "".join(f"{s / 2},{s}\n" for s in range(1, 40)), True),
    "nan step": ("step,loss\n" + "".join(f"{'nan' if s == 4 else s},{s}\n" for s in range(1, 40)), True),
    "huge step": ("step,loss\n1,1\n9007199254740993,2\n", True),
    "2**63 step": ("step,loss\n1,1\n9223372036854775808,2\n", True),
    "hex step": ("step,loss\n1,1\n0x10,2\n", True),
    "step 2**53": ("step,loss\n1,1\n9007199254740992,2\n", True),
    "resumed": ("step,loss\n" + "".join(f"{s},{s}\n" for s in list(range(1, 30)) + list(range(20, 40))), True),
    "long format": ("step,key,value\n" + "".join(f"{s},{k},{s * i}\n" for s in range(1, 30)
                                                  for i, k in enumerate(["loss", "kl", " ", "b"])), True),
    "long format junk value": ("step,tag,value\n1,loss,1\n2,loss,x\n", True),
    "wandb export": ("Step,run1 - train/reward,run1 - train/reward__MIN,run1 - train/reward__MAX\n"
                     + "".join(f"{s},{s / 10},0,1\n" for s in range(1, 30)), True),
    "wall column": ("_step,loss,_timestamp\n" + "".join(f"{s},{s},{1.7e9 + s}\n" for s in range(30)), True),
    "quoted cells": ('step,"loss"\n' + "".join(f'{s},"{s / 3}"\n' for s in range(1, 30)), True),
    "unfinished last line": (wide(30, lambda s: s) + "31,8.2", True),
    "unfinished blank last line": (wide(30, lambda s: s) + "   ", True),
    "crlf": (wide(30, lambda s: s).replace("\n", "\r\n"), True),
    "bom": ("\ufeff" + wide(30, lambda s: s), True),
    "no step column": ("epoch,loss\n" + "".join(f"{s},{s}\n" for s in range(1, 30)), True),
    "header only": ("step,loss\n", True),
    "empty column": ("step,loss,unused\n" + "".join(f"{s},{s},\n" for s in range(1, 30)), True),
    # the bulk reader hands these to the cell-by-cell reader
    "blank lines": (wide(30, lambda s: s).replace("\n5,", "\n\n5,"), False),
    "short rows": (wide(30, lambda s: s) + "31,1\n", False),
    "long row": (wide(30, lambda s: s) + "31,1,2,3\n", False),
    "trailing delimiter": (wide(30, lambda s: s) + "31,1,2,\n", False),
    "quoted line break": ('step,loss,note\n1,1,"a\nb"\n2,2,c\n', False),
    "repeated names": ("step,loss,loss\n" + "".join(f"{s},{s},{-s}\n" for s in range(1, 30)), False),
    "not utf-8": (None, False),
    "not utf-8 in the head": (None, False),
}


@pytest.mark.parametrize("name", list(CSV_CASES))
def test_the_bulk_csv_reader_reads_what_the_cell_reader_reads(tmp_path, monkeypatch, name):
    text, answers = CSV_CASES[name]
    path = tmp_path / "m.csv"
    if name == "not utf-8":
        path.write_bytes(wide(30, lambda s: s).encode() + b"31,\xff,1\n")
    elif name == "not utf-8 in the head":
        path.write_bytes(b"step,l\xffss\n1,2\n")
    else:
        path.write_bytes(text.encode())
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, path)
    assert in_bulk == by_cell
    assert answered == answers


def test_the_bulk_reader_names_the_line_of_a_bad_cell(tmp_path, monkeypatch):
    path = tmp_path / "m.csv"
    path.write_text(wide(3000, lambda s: "oops" if s == 2900 else s))
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, path)
    assert answered and in_bulk == by_cell == ("error", f"{path}:2901: non-numeric value 'oops' in metric column "
                                               "'loss'", 2901)


def test_tsv_and_gzip_go_the_same_way(tmp_path, monkeypatch):
    text = wide(500, lambda s: "nan" if s % 50 == 0 else 1 / s).replace(",", "\t")
    (tmp_path / "m.tsv.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, tmp_path / "m.tsv.gz")
    assert answered and in_bulk == by_cell and by_cell[0] == "run"


def test_a_step_column_passed_by_name(tmp_path, monkeypatch):
    (tmp_path / "m.csv").write_text("it,loss\n" + "".join(f"{s},{s}\n" for s in range(1, 30)))
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, tmp_path / "m.csv", step_col="it")
    assert answered and in_bulk == by_cell and by_cell[0] == "run"


def test_a_column_found_to_be_text_past_the_sample_is_read_again(tmp_path, monkeypatch):
    rows = 4000                         # the sample of the head is 64 KB: these rows reach past it
    text = "step,loss,note\n" + "".join(f"{s},{s},{'late' if s == rows else ''}\n" for s in range(1, rows + 1))
    (tmp_path / "m.csv").write_text(text)
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, tmp_path / "m.csv")
    assert answered and in_bulk == by_cell and by_cell[2]["loss"][0] == list(range(1, rows + 1))
    assert by_cell[4]["skipped_columns"] == ["note"]


CELLS = ["1", "-2.5", "0", "1e-3", "nan", "NaN", "-nan", "inf", "-Infinity", "1e400", "", " ", " 7 ", "abc",
         "nan(2)", "1_0", "\u0663", "+.5", "5.", "0x10", "1e", "TRUE", '"3"', '""']


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(CELLS), min_size=2, max_size=2), min_size=1, max_size=30),
       st.lists(st.sampled_from(["1", "2", "nan", "3.0", "", "x", "9007199254740993"]), min_size=1, max_size=30))
def test_random_tables_read_the_same_both_ways(tmp_path_factory, monkeypatch, cells, steps):
    path = tmp_path_factory.mktemp("random") / "m.csv"
    rows = [f"{steps[i % len(steps)] if i % 3 else i + 1},{a},{b}" for i, (a, b) in enumerate(cells)]
    path.write_text("step,a,b\n" + "\n".join(rows) + "\n")
    by_cell, in_bulk, _ = both_csv_paths(monkeypatch, path)
    assert in_bulk == by_cell


# --- JSON Lines: the block reader against records read one by one --------------------------------------

def by_record(path) -> tuple:
    """The table of a JSON Lines file built record by record, every column as cells (the meaning)."""
    from stabdiag.read._textio import json_lines

    rows, lines, collided = [], [], Counter()
    for lineno, obj in json_lines(str(path), notes := []):
        if not isinstance(obj, dict):
            raise InputError(str(path), "each line must be a JSON object", line=lineno)
        if isinstance(obj.get("data"), dict):
            obj = {**{k: v for k, v in obj.items() if k != "data"}, **obj["data"]}
        rows.append(_flat(obj, collided))
        lines.append(lineno)
    names = list(dict.fromkeys(k for row in rows for k in row))
    columns = {}
    for name in names:
        cells = np.empty(len(rows), dtype=object)
        cells[:] = [row.get(name) for row in rows]
        columns[name] = Column(np.array([c is not None for c in cells], dtype=bool), cells=cells)
    return Table(columns, len(rows), lines_from(lines), notes + _jsonl.collision_notes(str(path), collided))


def both_jsonl_ways(monkeypatch, path, **options):
    by_blocks = outcome(path, **options)
    monkeypatch.setattr(_jsonl, "read", lambda p, **kw: by_record(p))
    return outcome(path, **options), by_blocks


JSONL_CASES = {
    "flat": [{"step": s, "loss": 1 / s, "reward": s} for s in range(1, 40)],
    "sparse eval": [{"step": s, "loss": s / 3, **({"eval/acc": 0.5} if s % 10 == 0 else {})} for s in range(1, 40)],
    "verl data": [{"step": s, "data": {"actor/pg_loss": s / 7, "critic/score/mean": None}} for s in range(1, 30)],
    "nested": [{"step": s, "train": {"loss": s, "deep": {"x": -s}}, "train/loss": 0} for s in range(1, 30)],
    "nested some rows": [{"step": s, "a": ({"b": s} if s % 2 else s)} for s in range(1, 30)],
    "key order changes": [({"step": s, "a": s, "b": -s} if s % 2 else {"b": -s, "step": s, "a": s})
                          for s in range(1, 30)],
    "same size other keys": [({"step": s, "a": s} if s % 2 else {"step": s, "b": s}) for s in range(1, 30)],
    "strings and bools": [{"step": s, "a": ["1.5", True, 2, "nan", None][s % 5]} for s in range(1, 30)],
    "junk": [{"step": s, "a": "x" if s == 20 else s} for s in range(1, 30)],
    "list value": [{"step": s, "a": [1, 2] if s == 3 else s} for s in range(1, 30)],
    "text column": [{"step": s, "a": s, "run": "r1"} for s in range(1, 30)],
    "big integer": [{"step": s, "a": 10 ** 400 if s == 5 else s} for s in range(1, 30)],
    "float steps": [{"step": s + 0.0, "a": s} for s in range(1, 30)],
    "fractional step": [{"step": s / 2, "a": s} for s in range(1, 30)],
    "bool step": [{"step": True, "a": 1}],
    "none step": [{"step": None if s == 4 else s, "a": s} for s in range(1, 30)],
    "huge step": [{"step": 2 ** 63 if s == 5 else s, "a": s} for s in range(1, 30)],
    "step past 2**53": [{"step": 2 ** 53 + 1 if s == 5 else s, "a": s} for s in range(1, 30)],
    "long format": [{"step": s, "key": k, "value": s * i} for s in range(1, 20) for i, k in enumerate("abc")],
    "long format odd keys": [{"step": s, "key": [1, "1", " ", None][s % 4], "value": s} for s in range(1, 20)],
    "resumed": [{"step": s, "loss": 1.0} for s in range(1, 11)] + [{"step": s, "loss": 2.0} for s in range(8, 15)],
    "not an object": [{"step": 1, "a": 1}, [1, 2]],
    "empty objects": [{}, {"step": 1, "a": 2}, {}],
}


@pytest.mark.parametrize("name", list(JSONL_CASES))
def test_jsonl_in_blocks_reads_what_records_one_by_one_read(tmp_path, monkeypatch, name):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in JSONL_CASES[name]))
    one_by_one, by_blocks = both_jsonl_ways(monkeypatch, path)
    assert by_blocks == one_by_one


def test_jsonl_blocks_keep_line_order_of_problems(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsonl, "_LINES_PER_BLOCK", 4)
    lines = [json.dumps({"step": s, "a": s}) for s in range(1, 12)]
    lines[6] = "[1]"                                    # not an object, before a line that is not JSON
    lines[9] = '{"step": 10, "a": '
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    assert outcome(tmp_path / "m.jsonl") == ("error", f"{tmp_path / 'm.jsonl'}:7: each line must be a JSON object", 7)


def test_jsonl_blocks_join_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(_jsonl, "_LINES_PER_BLOCK", 7)
    rows = [{"step": s, "loss": 1 / s, **({"eval": s} if s % 9 == 0 else {}), **({"late": "x"} if s > 40 else {})}
            for s in range(1, 60)]
    rows[30]["loss"] = "1e999"
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    one_by_one, by_blocks = both_jsonl_ways(monkeypatch, tmp_path / "m.jsonl")
    assert by_blocks == one_by_one and by_blocks[0] == "run"
    assert any("too large for float64" in n for n in by_blocks[3])


# --- Parquet column by column -------------------------------------------------------------------------------

def test_parquet_steps_of_every_integer_width_and_nulls(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"step": pa.array([1, 2, None, 4], pa.uint16()), "loss": pa.array([1, None, 3, 4], pa.int8()),
                      "ok": pa.array([True, False, None, True]), "name": ["a", "b", "c", "d"]})
    pq.write_table(table, tmp_path / "m.parquet")
    run = tabular.load(str(tmp_path / "m.parquet"))
    assert run.series["loss"].steps.tolist() == [1, 4] and run.series["loss"].values.tolist() == [1.0, 4.0]
    assert run.series["ok"].values.tolist() == [1.0, 0.0, 1.0] and run.meta["skipped_columns"] == ["name"]
    big = pa.table({"step": pa.array([1, 2 ** 64 - 1], pa.uint64()), "loss": [1.0, 2.0]})
    pq.write_table(big, tmp_path / "big.parquet")
    with pytest.raises(InputError, match="18446744073709551615: not an integer in the step range") as info:
        tabular.load(str(tmp_path / "big.parquet"))
    assert info.value.line == 2


def test_parquet_integer_metrics_are_what_float_reads_of_each_cell(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    signed = [3, None, 2 ** 62 + 1, -(2 ** 63)]
    unsigned = [2 ** 64 - 1, 2 ** 53 + 1, None, 7]
    table = pa.table({"step": [1, 2, 3, 4], "tokens": pa.array(signed, pa.int64()),
                      "seen": pa.array(unsigned, pa.uint64())})
    pq.write_table(table, tmp_path / "m.parquet")
    run = tabular.load(str(tmp_path / "m.parquet"))
    for key, cells in (("tokens", signed), ("seen", unsigned)):
        written = [(step, float(c)) for step, c in zip([1, 2, 3, 4], cells) if c is not None]
        assert list(zip(run.series[key].steps.tolist(), run.series[key].values.tolist())) == written


def test_a_dense_table_shares_one_read_only_step_array(tmp_path):
    (tmp_path / "m.csv").write_text("step,a,b\n" + "".join(f"{s},{s},{-s}\n" for s in range(1, 50)))
    run = tabular.load(str(tmp_path / "m.csv"))
    a, b = run.series["a"], run.series["b"]
    assert a.steps is b.steps and not a.steps.flags.writeable
    with pytest.raises(ValueError):
        a.steps[0] = 5


# --- progress and imports -------------------------------------------------------------------------------

class Recorder:
    def __init__(self, enabled, total, label):
        self.enabled, self.total, self.seen = enabled, total, []
        Recorder.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def update(self, done):
        self.seen.append(done)


@pytest.mark.parametrize("name, module", [("m.csv", _csv_bulk), ("m.csv", _csv), ("m.jsonl", _jsonl)])
def test_big_files_report_progress_up_to_their_size(tmp_path, monkeypatch, name, module):
    monkeypatch.setattr(module, "ByteProgress", Recorder)
    monkeypatch.setattr(_csv, "BULK_BYTES", 0 if module is _csv_bulk else 1 << 60)
    monkeypatch.setattr(_jsonl, "_LINES_PER_BLOCK", 100)
    monkeypatch.setattr(_csv, "_BLOCK_ROWS", 100)
    monkeypatch.setattr(_csv_bulk, "_BLOCK_BYTES", 4096)
    rows = [{"step": s, "loss": 1 / s} for s in range(1, 3001)]
    text = ("step,loss\n" + "".join(f"{r['step']},{r['loss']}\n" for r in rows) if name.endswith(".csv")
            else "".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / name).write_text(text)
    tabular.load(str(tmp_path / name), progress=True)
    bar = Recorder.last
    assert bar.enabled and len(bar.seen) > 5 and bar.seen == sorted(bar.seen)
    assert bar.seen[-1] <= bar.total and bar.seen[-1] > bar.total * 0.9


@pytest.mark.parametrize("name, text", [
    ("m.csv", "step,loss\n" + "".join(f"{s},{1 / s}\n" for s in range(1, 201))),
    ("m.jsonl", "".join(json.dumps({"step": s, "loss": 1 / s}) + "\n" for s in range(1, 201))),
    ("trainer_state.json", json.dumps({"log_history": [{"step": s, "loss": 1 / s} for s in range(1, 201)]})),
    ("train.log", "".join(f"Step {s}/200 | loss: {1 / s}\n" for s in range(1, 201))),
])
def test_reading_a_small_log_imports_neither_pyarrow_nor_pandas(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    code = ("import sys; from stabdiag.read.assemble import load; (run,) = load(sys.argv[1]); "
            "print(len(run.series['loss']), *sorted(m for m in ('pyarrow', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["200"]


def test_values_are_exactly_what_float_reads(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-300, 300, 2000), [5e-324, 2.2e-308]])
    (tmp_path / "m.csv").write_text("step,x\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(values)))
    by_cell, in_bulk, answered = both_csv_paths(monkeypatch, tmp_path / "m.csv")
    assert answered and in_bulk == by_cell
    assert np.frombuffer(by_cell[2]["x"][1]).tolist() == values.tolist()
    assert not any(math.isnan(v) for v in values)
