"""The stability-methods map: which layer each method acts on, which a run has on (from its config), and
what the report and a baseline comparison say about them (issue 16)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.advise import advisor
from stabdiag.advise.cost import gpus_of
from stabdiag.advise.methods import active_methods, methods_map
from stabdiag.cli import app
from stabdiag.judge.engine import diagnose as judge
from stabdiag.read.assemble import load


def diagnose(run, *, gpus=None, gpu_hour_cost=None, **options):
    """Judged and advised (cost, forecasts, methods), as `stabdiag check` does."""
    return judge(run, advise=advisor(gpus=gpus, gpu_hour_cost=gpu_hour_cost), **options)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
runner = CliRunner()


def test_every_method_the_issue_names_is_placed_on_a_layer():
    names = {m.name: m.layer for m in methods_map().methods}
    assert {"dynamic-sampling": 1, "overlong-reward-shaping": 1, "clip-higher": 2, "token-level-loss": 2,
            "gspo": 2, "cispo": 2, "length-adaptive-gae": 1, "kl-penalty": 2, "adaptive-kl": 2, "entropy-bonus": 2,
            "gradient-clipping": 3, "skip-on-spike": 3, "muonclip": 3, "qk-clip": 3, "mixed-precision": 3,
            "importance-sampling-correction": 4, "routing-replay": 4, "async-version-tags": 4,
            "weight-sync-checks": 4}.items() <= names.items()
    assert len(methods_map().questions) == 3


def test_trl_configs_are_recognised():
    [run] = load(str(FIXTURES / "grpo_kl_high_lr"))
    active = {m.name: m for m in active_methods(run.meta["config"], list(run.series))}
    assert active["kl-penalty"].value == 0.1 and active["kl-penalty"].source_key == "beta"
    assert active["gradient-clipping"].value == 1.0 and active["token-level-loss"].value == "dapo"
    # epsilon_high unset: no clip-higher; the vLLM correction defaults on but acts only with vLLM
    assert "clip-higher" not in active and "importance-sampling-correction" not in active
    on = active_methods({"epsilon": 0.2, "epsilon_high": 0.28, "use_vllm": True,
                         "vllm_importance_sampling_correction": True, "max_grad_norm": 0.0}, [])
    assert {m.name for m in on} == {"clip-higher", "importance-sampling-correction"}


def test_the_reward_hacking_sample_names_its_methods_and_that_none_acts_on_layer_1():
    [run] = load(str(SAMPLES / "grpo_math_reward_hacking"))
    diag = diagnose(run)
    assert diag.root_layer == 1 and run.meta["config_files"] == ["config.yaml"]
    assert {m.name for m in diag.methods} == {"kl-penalty", "token-level-loss", "gradient-clipping"}
    assert "none acts on layer 1" in diag.methods_advice and "dynamic-sampling" in diag.methods_advice
    doc = diag.to_dict()
    assert {"name": "gradient-clipping", "layer": 3, "source_key": "actor_rollout_ref.actor.grad_clip",
            "value": 1.0} in doc["methods"]
    assert gpus_of(run, None)[0] == 8      # trainer.n_gpus_per_node x nnodes from the same config


def test_a_baseline_that_changed_only_max_grad_norm_acted_on_layer_3_not_the_root(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(SAMPLES / "grpo_math_reward_hacking", before)
    shutil.copytree(SAMPLES / "grpo_math_reward_hacking", after)
    config = (after / "config.yaml").read_text().replace("grad_clip: 1.0", "grad_clip: 0.5")
    (after / "config.yaml").write_text(config)
    result = runner.invoke(app, ["check", str(after), "--baseline", str(before), "--format", "json"])
    assert result.exit_code == 1, result.output
    [comparison] = json.loads(result.stdout)["comparisons"]
    assert comparison["method_changes"] == [{"change": "gradient-clipping grad_clip 1.0 -> 0.5", "layer": 3}]
    assert "acts on layer 3 while the root was layer 1" in comparison["summary"]


def test_methods_commands():
    listing = runner.invoke(app, ["methods"])
    assert listing.exit_code == 0 and "layer 3 (numeric update)" in listing.stdout and "qk-clip" in listing.stdout
    explained = runner.invoke(app, ["methods", "explain", "clip-higher"])
    assert explained.exit_code == 0 and "Does it change the gradient" in explained.stdout
    wrong = runner.invoke(app, ["methods", "explain", "clip-hig"])
    assert wrong.exit_code == 2 and "did you mean 'clip-higher'" in wrong.stderr


@pytest.mark.parametrize("name", ["sft_healthy", "grpo_healthy"])
def test_a_passing_run_gets_no_methods_advice(name):
    [run] = load(str(FIXTURES / name))
    assert diagnose(run).methods_advice is None
