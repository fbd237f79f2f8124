"""Text that fits any width: run and signal names cut in the middle and kept distinct, every cut marked,
sparse signals drawn as their points, no `-0` (issue 46 item 3); the goldens at 80/100/200 columns are in
test_golden.py."""

from __future__ import annotations

from stabdiag.report.sparkline import bridged, gaps, short, sparkline
from stabdiag.report.tree import ELLIPSIS, shorten, shorten_all


def test_names_cut_in_the_middle_stay_distinct_and_show_the_cut():
    names = ["megatron_golden/gpt_gpt3_mcore_te_tp1_pp1_resume_torch_dist_dist_optimizer",
             "megatron_golden/gpt_gpt3_mcore_te_tp1_pp2_resume_torch_dist_dist_optimizer",
             "megatron_golden/gpt_gpt3_mcore_te_tp1_pp4_vp1_dist_optimizer",
             "short_run"]
    for width in (16, 24, 30, 40):
        cut = shorten_all(names, width)
        assert len(set(cut.values())) == len(names), (width, cut)
        for name, shown in cut.items():
            assert len(shown) <= width or shown == name
            assert (shown == name) == (len(name) <= width) or shown == name
            if shown != name:
                assert ELLIPSIS in shown
    assert shorten("abcdefghij", 5) == "ab…ij" and shorten("abc", 5) == "abc"


def test_a_few_points_are_drawn_as_points_and_short_holes_bridged():
    three = [0.0] + [None] * 10 + [1.0] + [None] * 10 + [2.0]
    assert bridged(three) == three                               # never stretched over the line
    assert sparkline(three).count(" ") == 20
    every_other = [0.0, None, 1.0, None, 2.0, None, 3.0]
    assert None not in bridged(every_other)                     # an eval's cadence is bridged
    dense_with_hole = [1.0] * 10 + [None] * 20 + [1.0] * 10
    assert bridged(dense_with_hole)[15] is None                 # a run that logged nothing stays open
    assert gaps(dense_with_hole) == [(9, 30)] and gaps(every_other) == []


def test_numbers_never_read_minus_zero():
    assert short(-0.0) == "0" and short(-0.0001) == "-1.0e-04" and short(0.296) == "0.296"
    assert short(-0.00049) == "-4.9e-04" and short(-1e-9 * 0) == "0"


def test_a_constant_curve_is_drawn_flat_though_its_cells_are_means_that_round_apart():
    from stabdiag.report.sparkline import rebin

    lr = [1e-4] * 2000                                        # a constant learning rate, 2000 points in 28 cells
    cells = rebin(lr, 28)
    assert max(cells) != min(cells)                           # the means differ in their last bits ...
    assert set(sparkline(cells)) == {sparkline([1.0])}        # ... and the line is flat all the same
    assert len(set(sparkline([1e-4, 1e-4 * (1 + 1e-6), 1e-4]))) == 2    # a real change is still drawn
