"""FedCOF's covariance estimator (fedcof Eq. 7, Prop. 2) and its client-side variants.

Monte-Carlo checks use many synthetic classes drawn from the same Gaussian: each class is one independent
replicate of the federated experiment, so one batched call gives thousands of estimates.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.closed_form import CountNoise, fedcof, run_method
from benchmark.closed_form.fedcof import class_covariance_estimates, fedcof_statistics
from benchmark.closed_form.stats import ClassMeansMessage, class_means_message, subset_split

D = 3
SIGMA = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
MU = np.array([1.0, -2.0, 0.5])
F64 = np.dtype(np.float64)


def replicate_messages(counts: list[int], replicates: int, seed: int, subsets: int = 1):
    """Client k holds counts[k] iid N(MU, SIGMA) samples of every class (= replicate)."""
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(SIGMA)
    msgs = []
    for k, n in enumerate(counts):
        z = rng.standard_normal((replicates * n, D))
        x = MU + z @ chol.T
        y = np.repeat(np.arange(replicates), n)
        msgs.append(class_means_message(k, x, y, F64, subsets=subsets, seed=seed))
    return msgs


def within_standard_errors(estimates: np.ndarray, truth: np.ndarray, k: float = 4.0) -> np.ndarray:
    """|mean - truth| <= k standard errors, entrywise."""
    se = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    return np.abs(estimates.mean(axis=0) - truth) <= k * se


COUNTS = [2, 3, 5, 8, 13, 1]  # unequal n_{k,c}, K = 6 clients


def test_estimator_is_unbiased_monte_carlo():
    covs, k_c = class_covariance_estimates(replicate_messages(COUNTS, 4000, seed=0), 4000, D)
    assert np.all(k_c == len(COUNTS))
    assert within_standard_errors(covs, SIGMA).all()


def test_monte_carlo_check_has_power_against_biased_estimators():
    """The same check rejects the K-denominator and the unweighted covariance of the means."""
    msgs = replicate_messages(COUNTS, 4000, seed=0)
    covs, _ = class_covariance_estimates(msgs, 4000, D)
    k = len(COUNTS)
    assert not within_standard_errors(covs * (k - 1) / k, SIGMA).all()
    means = np.stack([m.means for m in msgs], axis=1)  # (replicates, K, d)
    centred = means - means.mean(axis=1, keepdims=True)
    unweighted = np.einsum("rkd,rke->rde", centred, centred) / (k - 1) * np.mean(COUNTS)
    assert not within_standard_errors(unweighted, SIGMA).all()


def test_batched_server_scatter_is_unbiased():
    """sum_c (N_c - 1) Sigma_c / sum_c (N_c - 1) from the batched server estimates SIGMA."""
    replicates = 4000
    msgs = replicate_messages(COUNTS, replicates, seed=1)
    stats = fedcof_statistics(msgs, replicates, D, gamma=0.0)
    pooled = stats.scatter / (replicates * (sum(COUNTS) - 1))
    covs, _ = class_covariance_estimates(msgs, replicates, D)
    np.testing.assert_allclose(pooled, covs.mean(0), atol=1e-9)  # same quantity, batched vs per class
    se = covs.std(0, ddof=1) / np.sqrt(replicates)
    assert np.all(np.abs(pooled - SIGMA) <= 4 * se)


def test_subset_means_from_one_client_are_unbiased():
    """One client, 40 samples per class, subsets=4: the 4 subset means estimate SIGMA (fedcof Fig. 5)."""
    msgs = replicate_messages([40], 3000, seed=2, subsets=4)
    covs, k_c = class_covariance_estimates(msgs, 3000, D)
    assert np.all(k_c == 4)
    assert within_standard_errors(covs, SIGMA).all()


def test_eq7_on_a_hand_computed_example():
    msg = ClassMeansMessage(
        0,
        np.array([0, 0, 0, 1]),
        np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 3.0], [5.0, 5.0]]),
        np.array([1.0, 1, 2, 4]),
    )
    covs, k_c = class_covariance_estimates([msg], 2, 2)
    # class 0: mu = (0 + 2 + 2) / 4 = (1, 1.5); deviations (-1,-1.5), (1,-1.5), (0,1.5) with n = 1, 1, 2
    expected = (
        np.outer([-1, -1.5], [-1, -1.5]) + np.outer([1, -1.5], [1, -1.5]) + 2 * np.outer([0, 1.5], [0, 1.5])
    ) / 2
    np.testing.assert_allclose(covs[0], expected)
    np.testing.assert_array_equal(covs[1], 0)  # K_c = 1: the reference divides by K_c, giving 0
    assert k_c.tolist() == [3, 1]


def test_subset_split_matches_reference_rule():
    rng = np.random.default_rng(0)
    sizes = lambda n, g: [len(p) for p in subset_split(n, g, rng)]
    assert sizes(10, 3) == [3, 3, 4]
    assert sizes(5, 4) == [2, 3]  # g' = min(4, floor(5/2)) = 2
    assert sizes(3, 4) == [3]  # fewer than 4 samples: one mean
    assert sizes(9, 1) == [9]
    parts = subset_split(17, 5, rng)
    assert sorted(np.concatenate(parts).tolist()) == list(range(17))


def test_subsets_keep_class_sums_and_multiply_means():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 4))
    y = np.repeat([0, 1], [40, 10])
    one = class_means_message(0, x, y, F64)
    many = class_means_message(0, x, y, F64, subsets=4, seed=3)
    assert many.classes.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    for c in (0, 1):
        sel = many.classes == c
        np.testing.assert_allclose((many.means[sel] * many.counts[sel, None]).sum(0), x[y == c].sum(0))
    assert many.uplink_floats() == 4 * one.uplink_floats()


def test_diagonal_and_spherical_restrictions():
    msgs = replicate_messages([3, 4, 6], 50, seed=4)
    full = fedcof_statistics(msgs, 50, D, gamma=0.0).scatter
    diag = fedcof_statistics(msgs, 50, D, gamma=0.0, covariance="diagonal").scatter
    sph = fedcof_statistics(msgs, 50, D, gamma=0.0, covariance="spherical").scatter
    np.testing.assert_allclose(diag, np.diag(np.diag(full)))
    np.testing.assert_allclose(sph, np.trace(full) / D * np.eye(D))


def test_gram_adds_shrinkage_global_mean_and_ridge():
    msgs = replicate_messages([3, 4, 6], 20, seed=5)
    st0 = fedcof_statistics(msgs, 20, D, gamma=0.0)
    st1 = fedcof_statistics(msgs, 20, D, gamma=0.7, ridge=0.01)
    n = 20 * 13
    np.testing.assert_allclose(st1.gram - st0.gram, (0.7 * (n - 20) + 0.01) * np.eye(D), atol=1e-9)
    np.testing.assert_allclose(
        st0.gram - st0.scatter, n * np.outer(st0.global_mean, st0.global_mean), atol=1e-9
    )


def test_chunking_does_not_change_the_statistics():
    msgs = replicate_messages([2, 5, 7, 1], 30, seed=6)
    a = fedcof_statistics(msgs, 30, D, gamma=1.0, chunk_rows=1)
    b = fedcof_statistics(msgs, 30, D, gamma=1.0, chunk_rows=10_000)
    np.testing.assert_allclose(a.gram, b.gram, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(a.class_sums, b.class_sums, rtol=1e-12)


def test_path_b_noise_stand_in_covariance():
    """A class with one mean gets (N_c - 1) * cov(mean, mean + 5 noisy copies) (reference path B).

    With one noise-free and five N(0, 0.1^2 I) vectors, E[cov] = (5 - 5/6) / 5 * 0.01 I = 0.01 * 5/6 I.
    """
    msgs = replicate_messages([9], 3000, seed=7)
    zero = fedcof_statistics(msgs, 3000, D, gamma=0.0)
    np.testing.assert_array_equal(zero.scatter, 0)
    noisy = fedcof_statistics(msgs, 3000, D, gamma=0.0, single_client="path_b_noise", seed=1)
    per_class = noisy.scatter / (3000 * 8)
    np.testing.assert_allclose(per_class, 0.01 * 5 / 6 * np.eye(D), atol=4e-4)


# ------------------------------------------------------------------------------------------------
# noisy counts (fedcof App. N)


def _problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, 400)
    x = (rng.normal(size=(400, 6)) + np.eye(5, 6)[y]).astype(np.float32)
    owner = rng.integers(0, 20, 400)
    return x, y, [np.flatnonzero(owner == k) for k in range(20)]


@pytest.mark.parametrize(
    "noise",
    [
        CountNoise("uniform", 1.0),
        CountNoise("gaussian", np.inf),
        CountNoise("gaussian", np.inf, gaussian_param="std"),
        CountNoise("laplace", np.inf),
    ],
)
def test_zero_noise_equals_plain_fedcof(noise):
    x, y, clients = _problem()
    plain = fedcof(x, y, 5, clients, gamma=1.0)
    np.testing.assert_array_equal(fedcof(x, y, 5, clients, gamma=1.0, noise=noise, seed=3).W, plain.W)


def test_noisy_counts_change_the_head():
    x, y, clients = _problem()
    plain = fedcof(x, y, 5, clients, gamma=1.0)
    noisy = fedcof(x, y, 5, clients, gamma=1.0, noise=CountNoise("laplace", 0.1), seed=3)
    assert np.abs(noisy.W - plain.W).max() > 1e-4


def test_noise_distributions_and_clipping():
    rng = np.random.default_rng(0)
    n = np.full(200_000, 50.0)
    uni = CountNoise("uniform", 0.3).perturb(n, rng) - n
    assert np.abs(uni).max() <= 0.7 * 50 and np.abs(uni).max() > 0.69 * 50
    gauss = CountNoise("gaussian", 0.25).perturb(n, rng) - n
    assert gauss.std() == pytest.approx(2.0, rel=0.02)  # variance 1/eps = 4
    gauss_std = CountNoise("gaussian", 0.25, gaussian_param="std").perturb(n, rng) - n
    assert gauss_std.std() == pytest.approx(4.0, rel=0.02)
    lap = CountNoise("laplace", 0.5).perturb(n, rng) - n
    assert np.abs(lap).mean() == pytest.approx(2.0, rel=0.02)  # E|Laplace(0, b)| = b = 1/eps
    small = CountNoise("laplace", 0.1).perturb(np.ones(10_000), rng)
    assert small.min() == 0.0 and np.all(small >= 0)
    rounded = CountNoise("gaussian", 0.5, round_counts=True).perturb(n[:1000], rng)
    np.testing.assert_array_equal(rounded, np.rint(rounded))


def test_clipped_classes_are_not_sent():
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    y = np.array([0, 0, 0, 1, 2, 2])
    noise = CountNoise("laplace", 0.05)
    for seed in range(20):
        msg = class_means_message(0, x, y, F64, noise=noise, seed=seed)
        assert np.all(msg.counts > 0)
        for c, m in zip(msg.classes, msg.means, strict=True):
            np.testing.assert_allclose(m, x[y == c].mean(0))  # true mean, noisy count
    sent = [len(class_means_message(0, x, y, F64, noise=noise, seed=s).classes) for s in range(20)]
    assert min(sent) < 3  # some class was clipped at least once


def test_multiround_with_subsets_and_noise_is_seeded():
    x, y, clients = _problem(1)
    kw = dict(gamma=1.0, subsets=3, noise={"kind": "gaussian", "epsilon": 0.5}, seed=11, participation=0.3)
    a = run_method("fedcof", x, y, x, y, clients, 5, **kw)
    b = run_method("fedcof", x, y, x, y, clients, 5, **kw)
    np.testing.assert_array_equal(a.head.W, b.head.W)
    assert [r["accuracy"] for r in a.extra["rounds"]] == [r["accuracy"] for r in b.extra["rounds"]]
