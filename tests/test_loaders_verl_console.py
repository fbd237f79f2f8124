"""verl console variants: the late-2024 `(main_task pid=...)` prefix with Ray's colour codes and a NUL
byte that NCCL prints into the log, and the current `(TaskRunner pid=...)` prefix.  The lines are the
shapes of verl-data's published logs; published logs are read from shared/real_healthy (skipped when
that folder is absent), never copied here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats import text as textlog

HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy"
real = pytest.mark.skipif(not HEALTHY.is_dir(), reason="shared/real_healthy not present")

DIM, CYAN, RESET = "\x1b[2m", "\x1b[36m", "\x1b[0m"


def _ray(who: str, line: str) -> str:
    return f"{DIM}{CYAN}({who}){RESET} {line}"


def _step(step: int, score: float, extra: str = "") -> str:
    return (f"step:{step} - timing/gen:19.190 - critic/kl:0.001 - actor/pg_loss:-0.003 - actor/entropy_loss:0.417"
            f" - actor/lr(1e-4):0.010 - critic/score/mean:{score}{extra} - response_length/mean:236.473")


LATE_2024 = "\n".join([
    "commit:", "50ac7252f97cf39997344237bca74162b2dc6d79", "",
    _ray("main_task pid=926049", "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,"),
    _ray("main_task pid=926049", "                                 'entropy_coeff': 0.001,"),
    _ray("wiQkzJWorkerDict_0:0 WorkerDict pid=934604",
         "[rank0]:[I1210 15:06:01.026826842 ProcessGroupNCCL.cpp:2166] [PG 0 (default_pg) Rank 0] "
         "ProcessGroupNCCL created ncclComm_ 0xab8cf20 on CUDA device: \x00"),
    _ray("main_task pid=926049", "step:0 - val/test_score/openai/gsm8k:0.010"),
    _ray("main_task pid=926049", _step(1, 0.004)),
    _ray("main_task pid=926049", "validation generation end"),
    _ray("main_task pid=926049", "Let's think step by step: 8 hours - 4 hours = 4 hours"),
    _ray("main_task pid=926049", _step(2, 0.008, " - val/test_score/openai/gsm8k:0.020")),
    _ray("main_task pid=926049", _step(3, "nan")),
]) + "\n"

CURRENT = "\n".join(
    [_ray("TaskRunner pid=678203", "step:0 - val-core/openai/gsm8k/reward/mean@1:0.221")]
    + [_ray("TaskRunner pid=678203", _step(s, 0.1 * s)) for s in range(1, 4)]) + "\n"


def _write(tmp_path, text, name="train.log"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def test_a_stray_nul_from_nccl_does_not_make_the_log_binary(tmp_path):
    path = _write(tmp_path, LATE_2024)
    assert loaders.loader_for(path) is textlog
    run = textlog.load(path)
    assert run.meta["format"] == "verl console"
    assert run.series["critic/score/mean"].steps.tolist() == [1, 2, 3]
    assert math.isnan(run.series["critic/score/mean"].values[-1])
    assert run.series["val/test_score/openai/gsm8k"].steps.tolist() == [0, 2]
    assert run.series["actor/lr(1e-4)"].values[0] == 0.01
    # the colour codes are not part of any key, and prose with "step" and " - " is no record
    assert not any("\x1b" in k or "[" in k for k in run.series)
    assert "8 hours" not in " ".join(run.series)


def test_a_binary_file_is_still_refused(tmp_path):
    path = tmp_path / "blob.log"
    path.write_bytes(b"step:1 - a:1\n" + b"\x00\x01\x02" * 2000)
    assert loaders.loader_for(str(path)) is None


def test_current_taskrunner_prefix(tmp_path):
    run = textlog.load(_write(tmp_path, CURRENT))
    assert run.series["critic/score/mean"].values.tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert run.series["val-core/openai/gsm8k/reward/mean@1"].steps.tolist() == [0]


@real
def test_published_verl_consoles_are_one_run_each():
    for folder in ("verl_baseline_ext/deepseek7b_grpo_gsm8k_mi300", "verl_baseline_ext/qwen2_7b_gpg_gsm8k_math_fsdp",
                   "verl_data/gemma2_2b_sft_gsm8k_0411"):
        [run] = assemble.load(str(HEALTHY / folder))
        assert run.meta["format"] == "verl console", folder
        assert not any("\x1b" in k for k in run.series), folder
    [run] = assemble.load(str(HEALTHY / "verl_baseline_ext/qwen2_7b_gpg_gsm8k_math_fsdp"))
    assert len(run.series["actor/entropy"]) == 210
