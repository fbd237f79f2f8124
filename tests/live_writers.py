"""Writers that log a small training run live, as a training job would (run as a subprocess by
tests/test_watch_live.py): `python tests/live_writers.py KIND DIR [--fail-at STEP] [--steps N]
[--cut-after STEP]`.  KIND is csv, tensorboard (tensorboard's own EventFileWriter) or wandb (an offline
wandb run).  The loss and grad norm turn NaN from --fail-at on; the step at which the first NaN was
flushed is printed with its wall time (`failed STEP TIME`).  --cut-after writes half of the next
record and then waits to be killed (a writer killed mid-record)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np


def metrics(step: int, fail_at: int | None, rng) -> dict[str, float]:
    loss = 2.0 * math.exp(-step / 150) + 0.5 + 0.03 * rng.standard_normal()
    grad_norm = 1.0 + 0.1 * rng.standard_normal()
    if fail_at is not None and step >= fail_at:
        loss = grad_norm = math.nan
    return {"loss": loss, "grad_norm": grad_norm,
            "reward": 0.3 + 0.3 * (1 - math.exp(-step / 100)) + 0.03 * rng.standard_normal(),
            "entropy": 1.2 + 0.03 * rng.standard_normal()}


class CsvWriter:
    def __init__(self, folder: str) -> None:
        self.fh = open(os.path.join(folder, "metrics.csv"), "w")
        self.fh.write("step,loss,grad_norm,reward,entropy\n")

    def log(self, step: int, values: dict) -> None:
        self.fh.write(f"{step}," + ",".join(repr(v) for v in values.values()) + "\n")

    def flush(self) -> None:
        self.fh.flush()

    def cut(self) -> None:
        self.fh.write("999,0.5,")                  # half a row, no newline


class TensorBoardWriter:
    def __init__(self, folder: str) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.writer = EventFileWriter(folder, flush_secs=3600)

    def log(self, step: int, values: dict) -> None:
        summary = self.summary_pb2.Summary(value=[self.summary_pb2.Summary.Value(tag=f"train/{k}", simple_value=v)
                                                  for k, v in values.items()])
        self.writer.add_event(self.event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def flush(self) -> None:
        self.writer.flush()

    def cut(self) -> None:
        path = self.writer.get_logdir()
        name = next(n for n in os.listdir(path) if "tfevents" in n)
        self.writer.flush()
        with open(os.path.join(path, name), "ab") as fh:
            fh.write(b"\x40\x00\x00\x00\x00\x00\x00\x00\x01\x02")   # a record header cut short


class WandbWriter:
    def __init__(self, folder: str) -> None:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        self.run = wandb.init(mode="offline", dir=folder, project="watch-test", settings=wandb.Settings(
            console="off", x_disable_stats=True, x_disable_meta=True, x_disable_machine_info=True))

    def log(self, step: int, values: dict) -> None:
        self.run.log({f"train/{k}": v for k, v in values.items()}, step=step)

    def flush(self) -> None:
        pass

    def cut(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("csv", "tensorboard", "wandb"))
    parser.add_argument("folder")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--fail-at", type=int, default=None)
    parser.add_argument("--cut-after", type=int, default=None)
    parser.add_argument("--every", type=int, default=10, help="steps per flush")
    parser.add_argument("--pause", type=float, default=0.05, help="seconds between flushes")
    args = parser.parse_args()
    writer = {"csv": CsvWriter, "tensorboard": TensorBoardWriter, "wandb": WandbWriter}[args.kind](args.folder)
    rng = np.random.default_rng(0)
    print("started", flush=True)
    for step in range(1, args.steps + 1):
        writer.log(step, metrics(step, args.fail_at, rng))
        if step % args.every == 0 or step == args.fail_at:
            writer.flush()
            if args.fail_at is not None and args.fail_at <= step < args.fail_at + args.every:
                print(f"failed {step} {time.time()}", flush=True)
            time.sleep(args.pause)
        if args.cut_after is not None and step == args.cut_after:
            writer.flush()
            writer.cut()
            print("cut", flush=True)
            time.sleep(3600)                     # killed here
    if args.kind == "wandb":
        time.sleep(1.0)                          # let the service write what it was sent
    print("done", flush=True)
    sys.stdout.flush()
    os._exit(0)                                  # a job that ends without wandb.finish()


if __name__ == "__main__":
    main()
