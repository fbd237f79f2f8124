"""The top-down walk: root choice, downstream marking, difficulty explanation, unknown layers."""

from __future__ import annotations

from stabdiag.judge.diagnosis import Finding, Status
from stabdiag.judge.engine import _mark_downstream, _root, diagnose
from tests.casegen import make_run

CALM = {
    "reward": {"ramp": [0.3, 0.8], "noise": 0.03},
    "eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.58], "noise": 0.01},
    "kl": {"ramp": [0.0005, 0.0045], "lognoise": 0.05},
    "entropy": {"ramp": [1.2, 1.05], "noise": 0.02},
    "loss": {"ramp": [0.02, 0.02], "noise": 0.01},
    "grad_norm": {"ramp": [0.8, 0.8], "lognoise": 0.2},
    "logprob_delta": {"ramp": [0.02, 0.02], "noise": 0.003},
    "frac_reward_zero_std": {"ramp": [0.2, 0.2], "noise": 0.03},
    "completions/mean_length": {"ramp": [400, 480], "noise": 10},
}


def run_with(**changes):
    specs = {k: dict(v) for k, v in CALM.items()}
    for key, spec in changes.items():
        if spec is None:
            specs.pop(key, None)
        else:
            specs[key] = spec
    return make_run("t", specs)


def test_calm_run_passes_every_layer():
    diag = diagnose(run_with())
    assert diag.verdict == "pass" and diag.root_layer is None
    assert [layer.status for layer in diag.layers] == [Status.PASS] * 4
    assert diag.exit_code("warn") == 0


def test_root_is_the_first_failing_layer_and_lower_layers_are_downstream():
    # the reward diverges from the start; the logprob drift (layer 4) begins at step 250, the NaN at 390
    diag = diagnose(run_with(**{
        "eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.42], "noise": 0.01},
        "logprob_delta": {"ramp": [0.02, 0.2], "ramp_steps": [240, 250], "noise": 0.01},
        "loss": {"ramp": [0.02, 0.02], "noise": 0.01, "nan_from": 390},
    }))
    assert diag.root_layer == 1
    by_layer = {f.layer: f for f in diag.findings}
    assert not by_layer[1].downstream
    assert by_layer[3].downstream and by_layer[4].downstream
    assert diag.layers[0].status is Status.FAIL and diag.layers[3].status is Status.FAIL


def test_a_deeper_layer_that_failed_first_is_the_root():
    """Root by time: a logprob drift present from step 1 comes before the reward's divergence, so layer 4
    is the root and the divergence is read as after it."""
    diag = diagnose(run_with(**{
        "eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.42], "noise": 0.01},
        "reward": {"ramp": [0.3, 0.8], "ramp_steps": [200, 400], "noise": 0.03},
        "logprob_delta": {"ramp": [0.2, 0.2], "noise": 0.01},
    }))
    assert diag.root_layer == 4
    (divergence,) = [f for f in diag.findings if f.rule == "L1.reward-eval-divergence"]
    assert divergence.downstream and "after L4." in divergence.downstream_reason


def test_warn_layer_is_root_only_when_nothing_fails():
    diag = diagnose(run_with(logprob_delta={"ramp": [0.07, 0.07], "noise": 0.003}))
    assert diag.verdict == "warn" and diag.root_layer == 4
    assert diag.exit_code("fail") == 0 and diag.exit_code("warn") == 1


def test_entropy_drop_with_all_correct_groups_is_attributed_to_data():
    # the eval stays flat: entropy falling while an eval improves would be sharpening, not a collapse
    collapse = {"kl": {"ramp": [0.01, 0.08], "ramp_steps": [150, 300], "lognoise": 0.05},
                "entropy": {"ramp": [2.0, 0.5], "ramp_steps": [150, 330], "noise": 0.03},
                "reward": {"ramp": [0.95, 0.95], "noise": 0.01},
                "eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.42], "noise": 0.01}}
    moving = diagnose(run_with(**collapse))
    assert moving.root_layer == 2 and moving.layers[1].status is Status.FAIL
    easy = diagnose(run_with(**collapse, frac_reward_zero_std={"ramp": [0.8, 0.8], "noise": 0.02}))
    assert easy.root_layer == 1
    layer2 = [f for f in easy.findings if f.layer == 2]
    assert layer2 and all(f.severity == "warn" and f.explained_by and f.downstream for f in layer2)


def test_missing_signals_make_a_layer_unknown_and_name_what_to_log():
    diag = diagnose(run_with(logprob_delta=None))
    layer4 = diag.layers[3]
    assert layer4.status is Status.UNKNOWN and "logprob_delta" in layer4.missing_signals
    assert {u.rule for u in diag.unknown} >= {"L4.logprob-mismatch"}


def test_behaviour_rules_stop_at_the_first_nonfinite_step():
    # after the NaN the run is broken: reward collapsing afterwards must not read as a layer-2 problem
    diag = diagnose(run_with(
        loss={"ramp": [0.02, 0.02], "noise": 0.01, "nan_from": 300},
        entropy={"ramp": [1.2, 1.05], "noise": 0.02, "set": {s: 0.1 for s in range(301, 401)}},
    ))
    assert diag.first_nonfinite_step == 300
    assert diag.root_layer == 3
    assert not [f for f in diag.findings if f.layer == 2]


def test_to_dict_round_trips_through_json():
    import json

    diag = diagnose(run_with(grad_norm={"ramp": [0.8, 0.8], "lognoise": 0.2, "set": {200: "inf"}}))
    data = json.loads(json.dumps(diag.to_dict(), allow_nan=False))
    assert data["root_layer"] == 3 and data["first_nonfinite_step"] == 200


def _finding(rule: str, layer: int, onset: int, low: int, high: int) -> Finding:
    return Finding(rule=rule, layer=layer, severity="fail", title=rule, start_step=low, end_step=high + 50,
                   message=rule, evidence={"onset_low": low, "onset_high": high}, check_first=(), onset=onset)


def test_a_signal_that_moves_only_after_another_layers_change_point_is_its_consequence():
    """Issue 44 item 4, both orders.  Truncation (layer 1) that jumps at step 160, inside the interval of a
    policy collapse dated 150 (140-170), moved only after it: the root is layer 2 and the truncation is
    downstream, though their intervals overlap (the layer order alone had rooted it at layer 1).  The
    reverse - truncation at 140 (130-150) before a collapse at 150 - is rooted at layer 1."""
    collapse = _finding("L2.entropy-collapse", 2, 150, 140, 170)
    after = _finding("L1.truncation-climb", 1, 160, 150, 165)
    root = _root([after, collapse])
    assert root is collapse
    marked = {f.rule: f for f in _mark_downstream([after, collapse], root)}
    assert marked["L1.truncation-climb"].downstream
    assert "after the change point of L2.entropy-collapse" in marked["L1.truncation-climb"].downstream_reason

    before = _finding("L1.truncation-climb", 1, 140, 130, 150)
    root = _root([before, collapse])
    assert root is before
    assert {f.rule: f.downstream for f in _mark_downstream([before, collapse], root)} == {
        "L1.truncation-climb": False, "L2.entropy-collapse": True}


def test_a_change_that_could_have_come_first_is_no_consequence():
    """A straight rise from the start is dated somewhere in a wide interval (340, 3-359): it may have moved
    before the collapse at 150, so time cannot order them and the layer order roots it at layer 1; the same
    at one step with the collapse is a tie too."""
    collapse = _finding("L2.entropy-collapse", 2, 150, 140, 170)
    wide = _finding("L1.reward-eval-divergence", 1, 340, 3, 359)
    assert _root([wide, collapse]) is wide
    same = _finding("L1.truncation-climb", 1, 150, 140, 170)
    assert _root([same, collapse]) is same


def test_a_reward_at_its_ceiling_from_the_start_roots_an_entropy_fall_at_layer_1():
    # issue 44 item 4, seed 000: a success rate at 0.95 from the first step (64 completions a point), the eval
    # flat, no zero-variance fraction logged; the entropy falls from step 150 with the KL rising.  The data is
    # too easy: the entropy findings are its consequence, the root is layer 1
    easy = {"kl": {"ramp": [0.01, 0.08], "ramp_steps": [150, 300], "lognoise": 0.05},
            "entropy": {"ramp": [2.0, 0.5], "ramp_steps": [150, 330], "noise": 0.03},
            "reward": {"ramp": [0.95, 0.95], "binomial": 64},
            "eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.42], "noise": 0.01},
            "frac_reward_zero_std": None}
    diag = diagnose(run_with(**easy))
    assert diag.root_layer == 1
    (cause,) = [f for f in diag.findings if f.rule == "L1.data-too-easy"]
    assert cause.onset == 1 and not cause.downstream
    layer2 = [f for f in diag.findings if f.layer == 2]
    assert {f.rule for f in layer2} >= {"L2.entropy-below-floor"}
    assert all(f.explained_by == "L1.data-too-easy" and f.severity == "warn" for f in layer2)
    # the same run with the reward at 0.3: nothing explains the fall, layer 2 is the root
    hard = diagnose(run_with(**{**easy, "reward": {"ramp": [0.3, 0.3], "binomial": 64}}))
    assert hard.root_layer == 2 and "L1.data-too-easy" in hard.layers[0].judged
    assert not any(f.rule == "L1.data-too-easy" for f in hard.findings)


def test_an_entropy_collapse_after_an_lr_jump_roots_at_layer_2_beside_a_reward_from_0_3():
    # the reward starts at 0.3 and climbs; the lr jumps 100x at step 200 and the entropy collapses within 20
    # steps: the easy-data reading is judged clean, the collapse is the root
    collapse = {"lr": {"ramp": [1e-6, 1e-6, 1e-4, 1e-4], "ramp_steps": [1, 199, 200, 400]},
                "entropy": {"ramp": [1.2, 1.2, 0.05, 0.05], "ramp_steps": [1, 200, 220, 400], "noise": 0.01},
                "reward": {"ramp": [0.3, 0.6], "binomial": 64},
                "frac_reward_zero_std": None}
    diag = diagnose(run_with(**collapse))
    assert diag.root_layer == 2 and diag.layers[1].status is Status.FAIL
    assert "L1.data-too-easy" in diag.layers[0].judged
    assert not any(f.rule == "L1.data-too-easy" for f in diag.findings)


def test_a_logged_zero_variance_fraction_is_read_instead_of_the_rewards_level():
    # the reward sits at 0.95 but the run logs its groups as mostly mixed (frac_reward_zero_std 0.2): the
    # direct evidence wins, the easy-data rule is not judged and the entropy fall stays layer 2's
    diag = diagnose(run_with(reward={"ramp": [0.95, 0.95], "binomial": 64},
                             entropy={"ramp": [2.0, 0.5], "ramp_steps": [150, 330], "noise": 0.03},
                             **{"eval/math500_accuracy": {"every": 20, "ramp": [0.42, 0.42], "noise": 0.01}}))
    (unknown,) = [u for u in diag.unknown if u.rule == "L1.data-too-easy"]
    assert "zero-variance group fraction" in unknown.describe()
    assert diag.root_layer == 2
