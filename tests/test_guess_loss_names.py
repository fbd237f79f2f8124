"""A method's own loss names (issue 44 item 8): where no key reads as the training loss, any *_loss / loss_*
key is a loss candidate, shown as a guess and overridable; a canonical loss wins, names of other signals
(value, KL, aux, router, a loss scale) and statistics are never read as the loss, two that tie are listed
with the --map line that settles them.  The real run is a Lightning CSVLogger log of a model trained here on
CPU whose only loss is `train/recon_loss`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from stabdiag.read.run import Run, Series
from stabdiag.signals.resolve import resolve
from tests.clihelp import cli


def run_of(*keys: str, steps: int = 40) -> Run:
    return Run("run", {k: Series.from_points(k, np.arange(1, steps + 1), np.linspace(2.0, 1.0, steps)) for k in keys})


@pytest.mark.parametrize("key", ["dpo_loss", "train/simpo_loss", "loss_mtp", "contrastive_loss", "loss_per_token"])
def test_a_methods_own_loss_is_the_loss_where_none_other_is_logged(key):
    signals = resolve(run_of(key, "grad_norm"))
    assert signals.get("loss").key == key
    assert signals.guessed["loss"] == "loss-named"
    assert any(n.startswith("guessed from names: ") and f"loss <- {key}" in n for n in signals.notes)


def test_a_canonical_loss_wins_and_the_methods_loss_stays_unmapped():
    signals = resolve(run_of("loss", "dpo_loss"))
    assert signals.get("loss").key == "loss" and "loss" not in signals.guessed
    assert "dpo_loss" in signals.unmapped


@pytest.mark.parametrize("key", ["value_loss", "critic_loss", "kl_loss", "aux_loss", "router_z_loss",
                                 "load_balancing_loss", "loss_scale", "loss_std", "val/dpo_loss", "num_loss_tokens",
                                 "loss_grad_norm", "profiling/Time taken: GRPOTrainer.compute_loss"])
def test_names_of_other_signals_and_statistics_are_never_the_loss(key):
    signals = resolve(run_of(key))
    assert signals.get("loss") is None or signals.get("loss").key != key


def test_two_candidates_that_tie_are_listed_not_guessed():
    signals = resolve(run_of("dpo_loss", "sft_loss"))
    assert signals.get("loss") is None
    assert signals.ambiguous["loss"] == ("dpo_loss", "sft_loss")
    assert any("settle it with --map loss=KEY" in n for n in signals.notes)
    chosen = resolve(run_of("dpo_loss", "sft_loss"), {"loss": "sft_loss"})
    assert chosen.get("loss").key == "sft_loss" and "loss" not in chosen.guessed


def test_no_guess_reads_no_methods_loss():
    assert resolve(run_of("dpo_loss"), guess=False).get("loss") is None


_LIGHTNING = textwrap.dedent("""\
    import sys
    import torch
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    class AutoEncoder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 3), torch.nn.Tanh(), torch.nn.Linear(3, 8))

        def training_step(self, batch, _):
            (x,) = batch
            recon = torch.nn.functional.mse_loss(self.net(x), x)
            self.log("train/recon_loss", recon, on_step=True)
            return recon

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(640, 8))
    trainer = L.Trainer(max_steps=80, logger=CSVLogger(sys.argv[1], name="ae"), log_every_n_steps=2,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        accelerator="cpu")
    trainer.fit(AutoEncoder(), torch.utils.data.DataLoader(data, batch_size=16))
    """)


@pytest.mark.slow          # ~10 s: a real Lightning run in a subprocess
def test_a_real_lightning_run_whose_only_loss_is_its_own_name_is_judged_on_it(tmp_path):
    pytest.importorskip("lightning")
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(_LIGHTNING)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], capture_output=True, text=True,
                          timeout=300, env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1",
                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = str(tmp_path / "logs" / "ae")
    shown = json.loads(cli("signals", run_dir, "--format", "json").stdout)
    [run] = shown["runs"]
    assert run["signals"]["loss"]["key"] == "train/recon_loss" and run["signals"]["loss"]["guessed"]
    report = json.loads(cli("check", run_dir, "--format", "json", "--exit-zero").stdout)
    [diag] = report["runs"]
    layer3 = diag["layers"][2]
    assert layer3["status"] != "unknown" and diag["verdict"] != "unknown"
    assert diag["signals"]["loss"] == "train/recon_loss"
