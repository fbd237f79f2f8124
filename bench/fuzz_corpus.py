"""The seed corpus of bench/fuzz.py: one small run of every input format stabdiag reads, written by the
real writers where they are installed (tensorboard's EventFileWriter, wandb in offline mode, pandas and
pyarrow, gzip, json) and by format strings copied from each framework's console otherwise.

A seed is a little tree of files and the path under it that the command line is given (a file or a run
directory).  Everything is seeded: the same seed gives the same bytes, except the W&B runs, which wandb
stamps with times and ids of its own; those are written once per wandb version and kept under the
temporary directory (`wandb_cache_dir`), so later runs and the CI slice reuse them.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

STEPS = 60


@dataclass
class Seed:
    """A tree of files (relative path -> bytes) and the path under it that is checked."""

    name: str
    files: dict[str, bytes]
    target: str                      # relative path given to `stabdiag check`
    kinds: dict[str, str] = field(default_factory=dict)    # file -> mutation kind (text, json, ...)


def _curves(rng: random.Random, steps: int = STEPS) -> list[dict[str, float]]:
    """Rows of GRPO-like metrics with noise, a NaN and an eval every 10 steps."""
    rows = []
    for s in range(steps):
        row = {"reward": 0.2 + 0.5 * s / steps + rng.gauss(0, 0.03), "loss": 1.0 / (s + 1) + rng.gauss(0, 0.01),
               "grad_norm": 1.0 + abs(rng.gauss(0, 0.2)), "kl": 0.001 * s + abs(rng.gauss(0, 1e-4)),
               "entropy": 1.2 - 0.005 * s + rng.gauss(0, 0.01), "response_length": 200 + 3 * s + rng.gauss(0, 5)}
        if s == steps // 2:
            row["grad_norm"] = math.nan
        if s % 10 == 0:
            row["eval/accuracy"] = 0.3 + 0.004 * s
        rows.append(row)
    return rows


def _csv(rows: list[dict], sep: str = ",", step_name: str = "step") -> bytes:
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame.insert(0, step_name, range(len(rows)))
    return frame.to_csv(index=False, sep=sep).encode()


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps({"step": s, **row}) + "\n" for s, row in enumerate(rows)).encode()


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = sorted({k for r in rows for k in r})
    table = pa.table({"step": pa.array(range(len(rows)), pa.int64()),
                      **{k: pa.array([r.get(k) for r in rows], pa.float64()) for k in keys},
                      "run": pa.array(["exp1"] * len(rows))})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _trainer_state(rows: list[dict]) -> bytes:
    history = []
    for s, row in enumerate(rows, 1):
        history.append({"loss": row["loss"], "grad_norm": row["grad_norm"], "learning_rate": 1e-5,
                        "reward": row["reward"], "kl": row["kl"], "epoch": s / len(rows), "step": s})
        if s % 20 == 0:
            history.append({"eval_loss": row["loss"] * 1.1, "epoch": s / len(rows), "step": s})
    history.append({"train_runtime": 12.5, "train_loss": 0.3, "total_flos": 1e12, "epoch": 1.0, "step": len(rows)})
    return json.dumps({"global_step": len(rows), "log_history": history}, indent=2).encode()


def _hf_console(rows: list[dict], quoted: bool) -> bytes:
    lines = ["***** Running training *****", "  Num Epochs = 1", f"  Total optimization steps = {len(rows)}",
             "  logging_steps=1"]
    for s, row in enumerate(rows, 1):
        values = {"loss": row["loss"], "grad_norm": row["grad_norm"], "learning_rate": 1e-5,
                  "reward": row["reward"], "kl": row["kl"], "epoch": round(s / len(rows), 2)}
        if quoted:
            lines.append("{" + ", ".join(f"'{k}': '{v:.4g}'" for k, v in values.items()) + "}")
        else:
            lines.append(f" {s * 100 // len(rows)}%|###  | {s}/{len(rows)} [00:01<00:02, 3.1it/s]" + repr(values))
    lines.append("{'train_runtime': 10.1, 'train_samples_per_second': 3.2, 'train_loss': 0.4, 'epoch': 1.0}")
    return ("\n".join(lines) + "\n").encode()


def _megatron(rows: list[dict]) -> bytes:
    lines = ["using world size: 8", "> building GPT2BPETokenizer tokenizer ..."]
    for s, row in enumerate(rows, 1):
        lines.append(f" iteration {s:8d}/{len(rows):8d} | consumed samples: {s * 32:10d} | elapsed time per "
                     f"iteration (ms): 812.3 | learning rate: 1.000E-04 | global batch size: 32 | lm loss: "
                     f"{row['loss']:.6E} | loss scale: 4096.0 | grad norm: {row['grad_norm']:.3f} | number of "
                     "skipped iterations:   0 | number of nan iterations:   0 |")
        if s % 20 == 0:
            lines.append(f" validation loss at iteration {s} | lm loss value: {row['loss'] * 1.1:.6E} | "
                         f"lm loss PPL: {math.exp(min(row['loss'], 50)):.6E} |")
    return ("\n".join(lines) + "\n").encode()


def _dschat(rows: list[dict]) -> bytes:
    lines = []
    for s, row in enumerate(rows):
        lines.append(f"epoch: 0|step: {s}|ppo_ep: 1|act_loss: {row['loss']:.4f}|cri_loss: {row['kl']:.4f}|"
                     "unsuper_loss: 0.0")
        lines.append(f"average reward score: {row['reward']:.4f}")
    return ("\n".join(lines) + "\n").encode()


def _llmc(rows: list[dict]) -> bytes:
    lines = [f"s:{s} trl:{row['loss']:.4f} lr:0.0006 norm:{row['grad_norm']:.4f}" for s, row in enumerate(rows)]
    lines += [f"s:{s} tel:{rows[s]['loss'] * 1.1:.4f}" for s in range(0, len(rows), 20)]
    return ("\n".join(lines) + "\n").encode()


def _verl(rows: list[dict]) -> bytes:
    lines = [f"(main_task pid=1234) step:{s} - actor/entropy:{row['entropy']:.4f} - actor/kl_loss:{row['kl']:.5f}"
             f" - critic/score/mean:{row['reward']:.4f} - actor/grad_norm:{row['grad_norm']:.4f} - "
             f"response_length/mean:{row['response_length']:.1f}" for s, row in enumerate(rows, 1)]
    return ("\n".join(lines) + "\n").encode()


def _loop(rows: list[dict]) -> bytes:
    lines = ["Starting training", "Loading model..."]
    lines += [f"Step {s}/{len(rows)} | loss: {row['loss']:.4f} | reward: {row['reward']:.4f} | kl: {row['kl']:.5f}"
              for s, row in enumerate(rows, 1)]
    return ("\n".join(lines) + "\n").encode()


def _notebook_pipe(rows: list[dict]) -> bytes:
    lines = ["| Step | Training Loss | reward | kl |", "|---|---|---|---|"]
    lines += [f"| {s} | {row['loss']:.6f} | {row['reward']:.6f} | {row['kl']:.6f} |" for s, row in enumerate(rows, 1)]
    return ("\n".join(lines) + "\n").encode()


def _notebook_html(rows: list[dict]) -> str:
    head = ("<table border='1'><thead><tr><th>Step</th><th>Training Loss</th><th>Validation Loss</th></tr>"
            "</thead><tbody>")
    body = "".join(f"<tr><td>{s}</td><td>{row['loss']:.6f}</td>"
                   f"<td>{'No log' if s % 10 else row['loss'] * 1.1}</td></tr>" for s, row in enumerate(rows, 1))
    return head + body + "</tbody></table>"


def _ipynb(rows: list[dict]) -> bytes:
    nb = {"cells": [{"cell_type": "code", "source": ["trainer.train()"], "metadata": {}, "execution_count": 1,
                     "outputs": [{"output_type": "display_data", "metadata": {},
                                  "data": {"text/html": [_notebook_html(rows)], "text/plain": ["<IPython>"]}}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1).encode()


def _wandb_export(rows: list[dict]) -> bytes:
    lines = ["Step,exp1 - reward,exp1 - reward__MIN,exp1 - reward__MAX"]
    lines += [f"{s},{row['reward']},{row['reward'] - 0.1},{row['reward'] + 0.1}" for s, row in enumerate(rows)]
    return ("\n".join(lines) + "\n").encode()


def _long_csv(rows: list[dict]) -> bytes:
    lines = ["step,key,value"]
    lines += [f"{s},{k},{v}" for s, row in enumerate(rows) for k, v in row.items() if k in ("reward", "loss")]
    return ("\n".join(lines) + "\n").encode()


def _verl_jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps({"step": s, "data": {"critic/score/mean": r["reward"], "actor/entropy": r["entropy"]}})
                   + "\n" for s, r in enumerate(rows, 1)).encode()


def _old_wandb(rows: list[dict]) -> dict[str, bytes]:
    history = "".join(json.dumps({"_step": s, "_timestamp": 1.7e9 + s, "_runtime": s, "train/reward": r["reward"],
                                  "train/loss": r["loss"], "media": {"_type": "image-file", "width": 4}}) + "\n"
                      for s, r in enumerate(rows)).encode()
    return {"files/wandb-history.jsonl": history,
            "files/wandb-summary.json": json.dumps({"train/reward": rows[-1]["reward"], "_step": len(rows)}).encode(),
            "files/config.yaml": b"wandb_version: 1\nlr:\n  desc: null\n  value: 0.001\n"}


def _tb_events(rows: list[dict], folder: Path, tensor_style: bool) -> bytes:
    """One event file written by tensorboard's EventFileWriter (legacy simple_value or TF2 tensors)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder), max_queue_size=len(rows) * 8 + 10)
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    for s, row in enumerate(rows):
        values = []
        for key in ("reward", "loss", "grad_norm", "kl"):
            tag = f"train/{key}"
            if tensor_style:
                value = Summary.Value(tag=tag, tensor=TensorProto(dtype=1, float_val=[row[key]]))
                if s == 0:
                    value.metadata.CopyFrom(meta)
            else:
                value = Summary.Value(tag=tag, simple_value=row[key])
            values.append(value)
        writer.add_event(Event(wall_time=1.7e9 + s, step=s, summary=Summary(value=values)))
    writer.close()
    (path,) = [p for p in folder.iterdir() if "tfevents" in p.name]
    data = path.read_bytes()
    path.unlink()
    return data


_WANDB_GENERATOR = textwrap.dedent('''
    import json, math, sys
    import wandb

    out = sys.argv[1]
    settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True,
                              x_disable_machine_info=True, silent=True, save_code=False, disable_git=True)
    made = {}
    run = wandb.init(project="fuzz", id="fuzz01", dir=out, mode="offline", settings=settings,
                     config={"lr": 1e-3, "model": {"name": "tiny"}})
    for s in range(60):
        row = {"train/reward": 0.2 + s / 100, "train/loss": 1.0 / (s + 1), "train/kl": 0.001 * s,
               "train/grad_norm": float("nan") if s == 30 else 1.0 + s % 3}
        if s % 10 == 0:
            row["eval"] = {"accuracy": s / 100}
        run.log(row, step=s)
    run.summary["best"] = 0.9
    made["plain"] = run.dir
    run.finish()
    run = wandb.init(project="fuzz", id="fuzz02", dir=out, mode="offline", settings=settings)
    run.define_metric("train/global_step")
    run.define_metric("*", step_metric="train/global_step", step_sync=True)
    for gs in range(1, 61):
        run.log({"train/reward": gs * 0.01, "train/global_step": gs})
        if gs % 10 == 0:
            run.log({"eval/accuracy": gs / 100})
    made["axis"] = run.dir
    run.finish()
    print(json.dumps(made))
''')


def wandb_cache_dir() -> Path:
    import wandb

    return Path(tempfile.gettempdir()) / f"stabdiag-fuzz-wandb-{wandb.__version__}"


def wandb_runs() -> dict[str, dict[str, bytes]]:
    """Two offline W&B runs written by wandb itself (once per wandb version, then read from the cache):
    name -> the run directory's files (relative path -> bytes), without wandb's debug logs."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        return {}
    cache = wandb_cache_dir()
    done = cache / "made.json"
    if not done.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONSOLE="off",
                   WANDB_DISABLE_GIT="true", WANDB_DISABLE_CODE="true", WANDB_DIR=str(cache),
                   WANDB_CONFIG_DIR=str(cache / "cfg"), WANDB_CACHE_DIR=str(cache / "cache"),
                   WANDB_DATA_DIR=str(cache / "data"))
        env.pop("WANDB_API_KEY", None)
        proc = subprocess.run([sys.executable, "-c", _WANDB_GENERATOR, str(cache)], env=env, capture_output=True,
                              text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"wandb could not write the seed runs: {proc.stderr[-2000:]}")
        done.write_text(proc.stdout.strip().splitlines()[-1])
    out = {}
    for name, files_dir in json.loads(done.read_text()).items():
        root = Path(files_dir).parent
        files = {}
        for path in root.rglob("*"):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not path.is_symlink() and (path.suffix == ".wandb" or rel.startswith("files/")):
                files[rel] = path.read_bytes()
        out[name] = {"root": root.name, "files": files}
    return out


def build(seed: int = 0, workdir: Path | None = None) -> list[Seed]:
    """Every seed of the corpus (deterministic for a given `seed`, W&B runs apart)."""
    rng = random.Random(seed)
    rows = _curves(rng)
    short = rows[:25]
    seeds = [
        Seed("csv", {"metrics.csv": _csv(rows)}, "metrics.csv"),
        Seed("tsv", {"metrics.tsv": _csv(rows, sep="\t")}, "metrics.tsv"),
        Seed("csv-long", {"long.csv": _long_csv(rows)}, "long.csv"),
        Seed("csv-wandb-export", {"export.csv": _wandb_export(rows)}, "export.csv"),
        Seed("jsonl", {"metrics.jsonl": _jsonl(rows)}, "metrics.jsonl"),
        Seed("jsonl-verl", {"filelogger.jsonl": _verl_jsonl(rows)}, "filelogger.jsonl"),
        Seed("parquet", {"metrics.parquet": _parquet(rows)}, "metrics.parquet"),
        Seed("csv-gz", {"metrics.csv.gz": gzip.compress(_csv(short), mtime=0)}, "metrics.csv.gz"),
        Seed("jsonl-gz", {"metrics.jsonl.gz": gzip.compress(_jsonl(short), mtime=0)}, "metrics.jsonl.gz"),
        Seed("trainer-state", {"trainer_state.json": _trainer_state(rows)}, "trainer_state.json"),
        Seed("hf-console-4", {"train.log": _hf_console(rows, quoted=False)}, "train.log"),
        Seed("hf-console-5", {"train.log": _hf_console(rows, quoted=True)}, "train.log"),
        Seed("megatron", {"megatron.log": _megatron(rows)}, "megatron.log"),
        Seed("dschat", {"ppo.log": _dschat(rows)}, "ppo.log"),
        Seed("llmc", {"main.log": _llmc(rows)}, "main.log"),
        Seed("verl-console", {"verl.out": _verl(rows)}, "verl.out"),
        Seed("loop", {"train.txt": _loop(rows)}, "train.txt"),
        Seed("notebook-pipe", {"table.txt": _notebook_pipe(short)}, "table.txt"),
        Seed("notebook-html", {"table.html": _notebook_html(short).encode()}, "table.html"),
        Seed("notebook-ipynb", {"train.ipynb": _ipynb(short)}, "train.ipynb"),
        Seed("wandb-history-jsonl", {f"wandb/run-20240101_000000-old1/{k}": v for k, v in _old_wandb(rows).items()},
             "wandb/run-20240101_000000-old1"),
    ]
    tb_dir = Path(tempfile.mkdtemp(prefix="stabdiag-fuzz-tb-", dir=workdir))
    legacy = _tb_events(rows, tb_dir / "a", tensor_style=False)
    tensors = _tb_events(short, tb_dir / "b", tensor_style=True)
    seeds.append(Seed("tensorboard", {"tb/events.out.tfevents.1700000000.host.1.0": legacy}, "tb"))
    seeds.append(Seed("tensorboard-tensors", {"tb/events.out.tfevents.1700000000.host.2.0": tensors}, "tb"))
    # an HF output dir: trainer_state.json + its TensorBoard folder + the console + a checkpoint copy
    hf = {"out/trainer_state.json": _trainer_state(short),
          "out/runs/Jan01_00-00-00_host/events.out.tfevents.1700000000.host.3.0": legacy,
          "out/train.log": _hf_console(short, quoted=False),
          "out/checkpoint-10/trainer_state.json": _trainer_state(short[:10])}
    seeds.append(Seed("hf-output-dir", hf, "out"))
    seeds.append(Seed("tree", {"runs/a/metrics.csv": _csv(short), "runs/b/metrics.jsonl": _jsonl(short),
                               "runs/c/notes.txt": b"not a log\n"}, "runs"))
    for name, run in wandb_runs().items():
        files = {f"wandb/{run['root']}/{rel}": data for rel, data in run["files"].items()}
        seeds.append(Seed(f"wandb-{name}", files, f"wandb/{run['root']}"))
    return seeds
