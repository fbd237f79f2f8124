"""Policy-change detectors: KL and entropy read together, and a floor under entropy."""

from __future__ import annotations

import numpy as np

from .. import _stats as st
from ._base import Curve, Evidence, _smooth_window


def _on_grid(curve: Curve, grid: np.ndarray) -> np.ndarray:
    smooth = st.rolling_median(curve.values, _smooth_window(len(curve.values)))
    return np.interp(grid, curve.steps, smooth)


def _explained(difficulty: Curve | None, lo: float, hi: float, threshold: float) -> bool:
    if difficulty is None:
        return False
    d = difficulty.finite()
    inside = (d.steps >= lo) & (d.steps <= hi)
    if not inside.any():
        return False
    values = d.values / 100.0 if np.nanmax(d.values) > 1.0 else d.values
    return float(np.median(values[inside])) >= threshold


def kl_entropy_joint(kl: Curve, entropy: Curve, difficulty: Curve | None = None, *, window_steps,
                     min_kl_ratio, min_entropy_drop_frac, min_kl, warmup_frac, min_kl_accel,
                     explained_zero_std_frac) -> Evidence | None:
    """Within one window KL at least doubles *and* entropy falls steeply (fail); one alone is a
    warning, and KL alone only when it accelerates after warm-up (KL grows from 0 in every run)."""
    k, e = kl.finite(), entropy.finite()
    if len(k.steps) < 10 or len(e.steps) < 10:
        return None
    lo, hi = max(k.steps[0], e.steps[0]), min(k.steps[-1], e.steps[-1])
    span = hi - lo
    window = min(window_steps, span / 2.0)
    if span <= 0 or window < 5:
        return None
    grid = np.linspace(lo, hi, 201)
    kg, eg = _on_grid(k, grid), _on_grid(e, grid)
    shift = max(1, int(round(window / (grid[1] - grid[0]))))
    if shift >= len(grid):
        return None
    k0, k1 = np.maximum(kg[:-shift], min_kl), kg[shift:]
    e0, e1 = eg[:-shift], eg[shift:]
    kl_ratio = k1 / k0
    ent_drop = np.where(e0 > 0, 1.0 - e1 / np.where(e0 > 0, e0, 1.0), 0.0)
    kl_up = (kl_ratio >= min_kl_ratio) & (k1 > min_kl)
    ent_down = ent_drop >= min_entropy_drop_frac
    # KL alone: only after warm-up and only when its slope accelerates against the previous window
    prev = np.full(len(k0), np.nan)
    prev[shift:] = kg[shift:-shift] - kg[:-2 * shift] if len(kg) > 2 * shift else np.nan
    accel = np.isfinite(prev) & ((k1 - kg[:-shift]) >= min_kl_accel * np.maximum(np.nan_to_num(prev), 0.0))
    after_warmup = grid[:-shift] >= lo + warmup_frac * span
    both = kl_up & ent_down
    kl_only = kl_up & accel & after_warmup & ~both
    ent_only = ent_down & ~both
    for mask, severity, what in ((both, None, "kl+entropy"), (kl_only, "warn", "kl"),
                                 (ent_only, "warn", "entropy")):
        if mask.any():
            # the steepest qualifying window: its start is where the fast movement began
            steepness = kl_ratio if what == "kl" else ent_drop
            i = int(np.argmax(np.where(mask, steepness, -np.inf)))
            start, end = float(grid[i]), float(grid[i + shift])
            explained = _explained(difficulty, start, end, explained_zero_std_frac)
            return Evidence(int(round(start)), int(round(end)), {
                "moved": what, "kl_start": float(kg[i]), "kl_end": float(kg[i + shift]),
                "kl_ratio": float(kl_ratio[i]), "entropy_start": float(eg[i]),
                "entropy_end": float(eg[i + shift]), "entropy_drop": float(ent_drop[i]),
                "window": int(round(window))},
                severity=severity, explained_by="zero_std_frac" if explained else None)
    return None


def floor_breach(values: Curve, difficulty: Curve | None = None, *, floor_frac, early_frac,
                 min_breach_steps, min_breach_frac_of_run, explained_zero_std_frac) -> Evidence | None:
    """The curve stays below `floor_frac` × its early-run level for a sustained stretch."""
    v = values.finite()
    if len(v.steps) < 10:
        return None
    early = st.edge_level(v.values, early_frac, min_points=5)
    if early <= 0:
        return None
    floor = floor_frac * early
    smooth = st.rolling_median(v.values, _smooth_window(len(v.values)))
    need = max(min_breach_steps, min_breach_frac_of_run * v.span)
    for a, b in st.true_runs(smooth < floor):
        if v.steps[b] - v.steps[a] >= need:
            explained = _explained(difficulty, v.steps[a], v.steps[b], explained_zero_std_frac)
            return Evidence(int(v.steps[a]), int(v.steps[b]), {
                "signal": v.signal, "key": v.key, "early": early, "floor": floor,
                "lowest": float(np.min(smooth[a:b + 1])), "last": float(smooth[b])},
                explained_by="zero_std_frac" if explained else None)
    return None
