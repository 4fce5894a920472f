"""Burn-in adaptation of HMC / MALA: step size by dual averaging, diagonal mass matrix.

Both run per chain (a Bayesian network's chains may sit in different modes,
so one chain's scales are not another's). The schedule is Stan's windowed
adaptation: a fast first stretch (step size only), slow windows of doubling
length at whose ends the inverse mass is set to the draws' regularised
variance (and the step-size search restarts), a fast final stretch.
"""

import math

import torch


class DualAveraging:
    """Nesterov dual averaging of ``log step_size`` toward a target acceptance.

    Hoffman & Gelman (2014), Algorithm 5, with their constants
    ``gamma=0.05, t0=10, kappa=0.75``, one search per chain.
    """

    def __init__(self, step_size, target_acceptance, gamma=0.05, t0=10.0, kappa=0.75):
        self.target, self.gamma, self.t0, self.kappa = target_acceptance, gamma, t0, kappa
        self.restart(step_size)

    def restart(self, step_size):
        self.mu = torch.log(10 * step_size)
        self.log_step = torch.log(step_size)
        self.log_step_average = torch.zeros_like(step_size)
        self.error_average = torch.zeros_like(step_size)
        self.count = 0

    def update(self, acceptance_probability):
        """One step of the search; returns the step size to use next, per chain."""
        self.count += 1
        eta = 1.0 / (self.count + self.t0)
        self.error_average = (1 - eta) * self.error_average + eta * (self.target - acceptance_probability)
        self.log_step = self.mu - math.sqrt(self.count) / self.gamma * self.error_average
        weight = self.count**-self.kappa
        self.log_step_average = weight * self.log_step + (1 - weight) * self.log_step_average
        return self.log_step.exp()

    @property
    def final_step_size(self):
        """The averaged step size, the one to keep after burn-in."""
        return self.log_step_average.exp()


#: The fewest burn-in steps that follow the last mass-matrix window, for the step size's search.
TERMINAL_STEPS = 50

#: The fewest burn-in steps the mass-matrix windows may span together. A window of one draw
#: has a variance of 0, and its regularised variance is the regulariser's 8e-4 on every
#: coordinate, a mass that carries nothing of the target; a burn-in of 59 steps left exactly
#: that. Stan's smallest window is 25 draws.
MIN_SLOW_STEPS = 20


def slow_window_ends(n_burnin):
    """Steps (0-based, exclusive) at which the slow mass-matrix windows end.

    Stan's proportions: 15% fast start, windows starting at 5% of the burn-in
    and doubling, and a fast end of 10%, but at least ``TERMINAL_STEPS``: the
    step size's search restarts at each new mass, ten times above the last
    step (Stan's and NumPyro's restart), and a fast end of two steps (at a
    burn-in of 20) kept what those first, exploratory steps found, which
    left chains stuck at an acceptance near 0. A burn-in too short for both
    and windows of ``MIN_SLOW_STEPS`` adapts the step size only.
    """
    start, end = int(0.15 * n_burnin), n_burnin - max(int(0.1 * n_burnin), TERMINAL_STEPS)
    if end - start < MIN_SLOW_STEPS:
        return []
    window = max(int(0.05 * n_burnin), 1)
    ends = []
    position = start
    while position + window < end:
        next_end = position + window
        # The window after this one would run past the slow phase: this one runs to its end (Stan's
        # windowed_adaptation.hpp tests ``>=`` on inclusive indices, the same rule on exclusive ends).
        if next_end + 2 * window > end:
            next_end = end
        ends.append(next_end)
        position, window = next_end, 2 * window
    if not ends or ends[-1] != end:
        ends.append(end)
    return ends


class WindowedVariance:
    """Running per-chain mean and variance of positions over a window (Welford)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.count, self.mean, self.m2 = 0, None, None

    def update(self, position):
        self.count += 1
        if self.mean is None:
            self.mean, self.m2 = position.clone(), torch.zeros_like(position)
            return
        delta = position - self.mean
        self.mean = self.mean + delta / self.count
        self.m2 = self.m2 + delta * (position - self.mean)

    def inverse_mass(self):
        """Stan's regularised variance: shrunk toward 1e-3 with weight 5 / (n + 5)."""
        n = self.count
        variance = self.m2 / max(n - 1, 1)
        return (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))
