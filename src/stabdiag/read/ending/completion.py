"""What a console's tail says about a run that completed: the lines printed once training is over, and the
lines printed at every exit, clean or not, that are never a death.

Evidence of completion (`completion`), each as printed by the code that writes it:

- the trainer's final summary: HF `{'train_runtime': ...}` / "Training completed", verl's "Final validation
  metrics", "training finished";
- a saved final model: DeepSpeed-Chat's `saving the final model ...` (training/step1_supervised_finetuning/
  main.py and its steps 2 and 3), "Saving final ..." / "final checkpoint";
- a final evaluation: DeepSpeed-Chat's `***** Evaluating perplexity, Epoch 16/16 *****` at its last epoch;
- lit-gpt's `Training time: 1234.56s` (pretrain/*.py, printed after train() returns), Megatron-LM's
  `[after training is done]` (print_datetime in megatron/training/training.py);
- the DeepSpeed launcher's `[launch.py:NNN:main] Process N exits successfully.` for its ranks: it prints that
  only for a return code of 0 (deepspeed/launcher/launch.py), and `exits with return code` otherwise.

Exit-time noise (`is_exit_noise`), never a death whatever it names:

- PyTorch >= 2.4's warning from the ProcessGroupNCCL destructor when a script ends without
  destroy_process_group(): `[rank0]:[W414 16:54:27.2 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process
  group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application
  should call destroy_process_group ...` (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; DeepSpeed-Chat's
  scripts and the HF Trainer end that way);
- wandb's finishing messages (`wandb: Run history:`, `wandb: 🚀 View run ...`, `wandb: Synced ...`, `wandb: Find
  logs at: ...`);
- the DeepSpeed launcher's `exits successfully` lines;
- a traceback Python prints at interpreter exit under `Exception ignored in: <function X.__del__ ...>` (a
  destructor failing while the process shuts down: DeepSpeedCPUAdam's `ds_opt_adam`).

Ray's `(raylet) A worker died or was killed ...` is not noise by itself (a worker may die mid-run): it is
shutdown noise once the run shows it completed, or once its progress reached its planned length (see
stabdiag.read.ending.settle).
"""

from __future__ import annotations

import re

_NOISE = re.compile(r"has NOT been destroyed before we destruct ProcessGroup|should call destroy_process_group|"
                    r"warning has only been added since PyTorch|^wandb: |\bwandb: (?:Synced|Find logs|🚀 View run|"
                    r"Run history|Run summary|Waiting for W&B)|\[launch\.py:\d+:main\] Process \d+ exits successfully")
_SUMMARY = re.compile(r"'train_runtime'|\"train_runtime\"|Training completed|training finished|"
                      r"Final validation metrics", re.IGNORECASE)
_SAVED_FINAL = re.compile(r"saving the final model|saving final\b|final checkpoint|final model saved", re.IGNORECASE)
_FINAL_EVAL = re.compile(r"\*{5} Evaluating [\w ]+, Epoch (\d+)/(\d+) \*{5}")
_LIT_GPT_DONE = re.compile(r"^Training time: [\d.]+s$|\[after training is done\]")
_LAUNCHER_OK = re.compile(r"\[launch\.py:\d+:main\] Process \d+ exits successfully")
_LAUNCHER_FAILED = re.compile(r"\[launch\.py:\d+:main\] (?:Process \d+ exits with return code|Killing subprocess)")
IGNORED_AT_EXIT = "Exception ignored in"
# the literals, lowered, of which a line the patterns above match holds one: a tail (most of them) that holds
# none is not searched line by line, and only the lines that hold one are (a pattern tried at every position
# of a verl tail's long lines costs more than the whole read; see console._last_index)
_COMPLETION_LITERALS = ("train_runtime", "training completed", "training finished", "final validation metrics",
                        "saving the final model", "saving final", "final checkpoint", "final model saved",
                        "evaluating", "training time:", "after training is done", "launch.py")
NOISE_LITERALS = ("destroyed before we destruct", "destroy_process_group", "added since pytorch", "wandb:",
                  "exits successfully", IGNORED_AT_EXIT.lower())
# each kind of evidence as the ending's message says it
_WORDS = {"summary": "the trainer printed its final summary", "saved": "the final model was saved",
          "eval": "the final evaluation was printed", "done": "the trainer printed that training is done",
          "exit0": "every process exited successfully (the DeepSpeed launcher's exit code 0)"}


def is_exit_noise(line: str) -> bool:
    """A line printed at every exit, clean or not (see the module docstring): never a death."""
    return _NOISE.search(line) is not None


def may_hold(folded: str | bytes, literals: tuple[str, ...]) -> bool:
    """`folded` (a text lowered) holds one of the literals."""
    if isinstance(folded, bytes):
        return any(literal.encode() in folded for literal in literals)
    return any(literal in folded for literal in literals)


def completion(lines: list[str], folded: str | bytes | None = None) -> tuple[int, list[str]] | None:
    """(index of the last line that says so, what says so, in words) when the lines show that training
    completed; None when they do not.  `folded` (the lines joined and lowered), when given, spares a tail
    that holds none of the evidence's words the look at each line."""
    if folded is not None and not may_hold(folded, _COMPLETION_LITERALS):
        return None
    found: dict[str, tuple[int, str]] = {}
    launcher_failed = False
    for index, line in enumerate(lines):
        if not may_hold(line.lower(), _COMPLETION_LITERALS):
            continue
        kind = _kind_of(line)
        if kind is not None:
            found[kind[0]] = (index, kind[1])
        elif _LAUNCHER_FAILED.search(line):
            launcher_failed = True
    if launcher_failed:
        found.pop("exit0", None)
    if not found:
        return None
    last = max(index for index, _ in found.values())
    return last, [what for _, what in sorted(found.values())]


def _kind_of(line: str) -> tuple[str, str] | None:
    if _SUMMARY.search(line):
        return "summary", _WORDS["summary"]
    if _SAVED_FINAL.search(line):
        return "saved", f"{_WORDS['saved']} ('{line.strip()[:60]}')"
    final_eval = _FINAL_EVAL.search(line)
    if final_eval and final_eval.group(1) == final_eval.group(2) and final_eval.group(1) != "0":
        return "eval", f"{_WORDS['eval']} (Epoch {final_eval.group(1)}/{final_eval.group(2)})"
    if _LIT_GPT_DONE.search(line.strip()):
        return "done", f"{_WORDS['done']} ('{line.strip()[:60]}')"
    if _LAUNCHER_OK.search(line):
        return "exit0", _WORDS["exit0"]
    return None


def says_summary(words: list[str]) -> bool:
    """The evidence is the trainer's own final summary (the ending's message then reads as before)."""
    return words == [_WORDS["summary"]]
