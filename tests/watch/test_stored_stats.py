"""Statistics are data: a dump that stores only statistics (and maybe a digest) per tensor.

Until a statistics-only format is merged, :class:`StoredStatsTensor` stands in for one: it wraps a
real ``.npy`` tensor of a dumpmaker dump and shows only its statistics (computed once, as a format
would have stored them) and a blake2b digest of its bytes. Statistics-only conditions must give
exactly what the values give; the others must say what they miss, per check, and never crash.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pytest

from watch_kit import Plant, full, hit_keys, make, run, said, said_keys, watched
from debugger import open_dump
from debugger.formats.base import TensorHeader, TensorSource
from debugger.model import Dump
from debugger.stats.core import STAT_NAMES, Stats, compute_stats
from debugger.watch.rules import change_lower_bound, unchanged_from_statistics

# What MindSpore's statistic dumps typically hold: no counts.
FEW = ("max", "min", "mean", "l2norm")


@dataclass(frozen=True)
class StoredStatsTensor(TensorSource):
    """A tensor whose dump holds only statistics (some of STAT_NAMES) and, optionally, a digest."""

    inner: TensorSource
    stats: Mapping[str, float] = field(default_factory=dict)
    exact: str | None = None

    @classmethod
    def of(cls, inner: TensorSource, names: Sequence[str] = STAT_NAMES, digest: bool = True) -> "StoredStatsTensor":
        """Statistics (the names given, in that order) and digest of ``inner``, computed once."""
        a = np.asarray(inner.array(mmap=False))
        s = compute_stats(a)[0].to_dict()
        exact = hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).hexdigest() if digest else None
        return cls(inner, {n: s[n] for n in names}, exact)

    @property
    def identity(self) -> str:
        """Not the wrapped file's: a statistics cache must not mix the two."""
        return "stored-stats|" + self.inner.identity

    @property
    def location(self) -> str:
        """The wrapped file."""
        return self.inner.location

    @property
    def stored_bytes(self) -> int:
        """As listed."""
        return self.inner.stored_bytes

    @property
    def has_values(self) -> bool:
        """Statistics only."""
        return False

    def header(self) -> TensorHeader:
        """dtype and shape are stored with the statistics."""
        return self.inner.header()

    def array(self, mmap: bool = True) -> np.ndarray:
        """Not stored."""
        raise self._no_values()

    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """Not stored."""
        raise self._no_values()

    def stored_stats(self) -> Mapping[str, float] | None:
        """The statistics kept."""
        return self.stats

    def digest(self) -> str | None:
        """blake2b of the values' bytes, when kept."""
        return self.exact


def statistics_only(root: str, names: Sequence[str] = STAT_NAMES, digest: bool = True) -> Dump:
    """The dump at ``root`` with every tensor's source swapped for its stored statistics."""
    dump = open_dump(root)
    for r in dump.ranks:
        for ref in r.tensors():
            ref.source = StoredStatsTensor.of(ref.source, names, digest)
    return dump


def same(a: Any, b: Any) -> None:
    """Equal scan JSON, apart from the reads (a statistics-only scan reads no tensor)."""
    assert a.to_dict() == b.to_dict()


# -- a dump where many conditions fire ---------------------------------------------------------------
@pytest.fixture(scope="module")
def planted(tmp_path_factory, layout):
    """fc1.weight unchanged then changed; fc2.weight's gradient zero; a NaN origin in iteration 3; a loss
    that stalls."""
    lay = layout()
    b = full(1.0)
    plant = Plant().weight(lay, "fc1.weight", before=b * 0.0, seq=[b, b, b * 3, b * 3])
    plant.set(lay.gradient("fc2.weight"), lambda d: np.zeros_like(d))
    origin = lay.producer(lay.activation(), 0)
    plant.set(origin, lambda d: np.where(np.arange(d.size).reshape(d.shape) == 0, np.nan, d).astype(d.dtype), it=3)
    for i, v in enumerate([4.0, 2.0, 2.0, 3.0]):
        plant.set(lay.loss, v, it=i)
    root = make(tmp_path_factory.mktemp("stored"), plant=plant, iterations=4)
    return root, lay


ANSWERED = [   # statistics suffice for these (with the counts stored)
    "gradient_vanishing", "gradient_vanishing:abs_mean_lt=1e-3,max_lt=0.5", "tensor_all_zero",
    "tensor_all_zero:zero_percentage_ge=20", "weight_too_large:max_gt=0.5,mean_gt=0.9", "weight_too_small:min_lt=0.5",
    "tensor_too_large:abs_mean_gt=0.1", "tensor_too_small:mean_lt=0", "gradient_too_large:max_gt=0.01",
    "weight_initialization", "weight_initialization:max_gt=0.5,min_lt=0.5", "overflow", "tensor_overflow",
    "tensor_exploding", "tensor_exploding:only_nan=1", "weight_overflow", "gradient_exploding",
    "activation_range:max_min_gt=0.1", "tensor_range:max_min_lt=0.5", "loss_not_decreasing:num_steps=1",
]
NEEDS_VALUES = [   # activation_dead_relu is activation_saturation's family; this net has no ReLU
    "tensor_range:range_start_inclusive=0,range_percentage_gt=10",
    "activation_range:range_end_inclusive=0.5,range_percentage_lt=90",
    "activation_saturation", "weight_change_too_large", "weight_change_too_small", "weight_update_ratio",
]


@pytest.mark.parametrize("spec", ANSWERED)
def test_statistics_answer_exactly_what_values_answer(planted, spec):
    root, _ = planted
    by_values = run(root, spec)
    by_stats = run(statistics_only(root), spec)
    same(by_stats, by_values)
    assert by_stats.files_checked == 0 < by_values.files_checked


def test_the_planted_problems_are_found_from_statistics(planted):
    root, lay = planted
    res = run(statistics_only(root), "overflow", "gradient_vanishing", "weight_initialization",
              "loss_not_decreasing:num_steps=1")
    assert (3, lay.producer(lay.activation(), 0)) in hit_keys(res, "overflow")
    assert [n for _, n in hit_keys(res, "gradient_vanishing")] == [lay.gradient("fc2.weight")] * 4
    assert hit_keys(res, "weight_initialization") == [(0, "fc1.weight")]
    assert [i for i, _ in hit_keys(res, "loss_not_decreasing")] == [2, 3]


@pytest.mark.parametrize("spec", NEEDS_VALUES)
def test_conditions_that_need_values_say_so_on_every_check(planted, spec):
    root, _ = planted
    by_values = run(root, spec)
    by_stats = run(statistics_only(root), spec)
    assert watched(by_stats) == []
    needs = "needs tensor values; this dump holds statistics only: " + ", ".join(STAT_NAMES)
    planning = {(e.iteration, e.node, e.error) for e in by_values.errors if "previous iteration" in e.error}
    for e in said(by_stats):
        assert e.error in (needs, "previous value: " + needs) or (e.iteration, e.node, e.error) in planning, e
    # every tensor the values hit is an error record now
    assert said(by_stats)
    assert {(h.iteration, h.node) for h in watched(by_values)} <= {(e.iteration, e.node) for e in said(by_stats)}


@pytest.mark.parametrize("spec", ANSWERED + NEEDS_VALUES + ["weight_not_changed", "tensor_unchanged"])
def test_without_the_counts_every_check_names_what_the_dump_holds(planted, spec):
    root, _ = planted
    res = run(statistics_only(root, FEW, digest=False), spec)
    values = run(root, spec)
    assert watched(res) == []
    assert said(res) or not (watched(values) or values.errors)
    planning = [e.to_dict() for e in values.errors]     # no earlier iteration: found before any tensor is read
    for e in said(res):
        assert "this dump holds statistics only: max, min, mean, l2norm" in e.error or e.to_dict() in planning, e


def test_a_missing_statistic_is_named(planted):
    root, lay = planted
    res = run(statistics_only(root, ("count", "nan", "pos_inf", "neg_inf", "max", "min")), "gradient_vanishing")
    assert watched(res) == [] and said(res)
    assert {e.error for e in said(res)} == {
        "needs statistic abs_mean; this dump holds statistics only: count, nan, pos_inf, neg_inf, max, min"}
    # max_lt reads only what is stored: answered, and exactly as from values
    spec = "gradient_vanishing:max_lt=1e-30"
    same(run(statistics_only(root, ("count", "nan", "pos_inf", "neg_inf", "max")), spec), run(root, spec))


# -- unchanged tensors: digests and the lower bound --------------------------------------------------
def test_equal_digests_are_an_exact_zero_change(planted):
    root, lay = planted
    for spec in ("weight_not_changed", "tensor_unchanged", "tensor_unchanged:num_steps=2"):
        by_values = run(root, spec)
        by_stats = run(statistics_only(root), spec)
        assert watched(by_values)
        # every hit of the values (equal tensors here: no change within the tolerance is planted) ...
        assert all(h.actual == {"atol": 0.0} for h in watched(by_values))
        assert [h.to_dict() for h in by_stats.hits] == [h.to_dict() for h in by_values.hits], spec
        # ... and every miss is proven by the statistics, or said to be undecided, never silent
        proven_or_said = {(e.iteration, e.node) for e in said(by_stats)} | set(hit_keys(by_stats))
        missed = {(e.iteration, e.node) for e in by_values.errors}
        assert missed <= proven_or_said
        for e in said(by_stats):
            assert e.to_dict() in [x.to_dict() for x in said(by_values)] or e.error == (
                "digests differ but statistics cannot tell whether the change is within tolerance"), e
    res = run(statistics_only(root), "weight_not_changed")
    assert (1, "fc1.weight") in hit_keys(res) and (3, "fc1.weight") in hit_keys(res)
    assert (2, "fc1.weight") not in hit_keys(res) and (2, "fc1.weight") not in {(i, n) for i, n, _ in said_keys(res)}


def test_a_change_within_tolerance_with_other_digests_is_undecided_not_a_pass(tmp_path, layout):
    lay = layout()
    b = full(1.0)
    tiny = b.copy()
    tiny[0] += 2.0 ** -23           # within rtol 1e-5: values call it unchanged
    big = b * 2                     # far outside
    root = make(tmp_path, plant=Plant().weight(lay, "fc1.weight", before=b, seq=[b, tiny, big]))
    by_values = run(root, "weight_not_changed")
    assert [k for k in hit_keys(by_values) if k[1] == "fc1.weight"] == [(0, "fc1.weight"), (1, "fc1.weight")]
    by_stats = run(statistics_only(root), "weight_not_changed")
    mine = [(i, m) for i, n, m in said_keys(by_stats) if n == "fc1.weight"]
    assert [k for k in hit_keys(by_stats) if k[1] == "fc1.weight"] == [(0, "fc1.weight")]
    assert mine == [(1, "digests differ but statistics cannot tell whether the change is within tolerance")]
    # without digests, an equal tensor cannot be told from a slightly changed one: the values are needed
    no_digest = run(statistics_only(root, digest=False), "weight_not_changed")
    assert [(i, m) for i, n, m in said_keys(no_digest) if n == "fc1.weight"] == [
        (0, "needs tensor values; this dump holds statistics only: " + ", ".join(STAT_NAMES)),
        (1, "needs tensor values; this dump holds statistics only: " + ", ".join(STAT_NAMES))]
    assert "fc1.weight" not in {n for _, n in hit_keys(no_digest)}


def _stats(a: np.ndarray) -> Stats:
    return compute_stats(np.asarray(a, np.float64))[0]


def test_the_lower_bound_never_exceeds_the_largest_difference():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 50))
        p = rng.normal(size=n) * rng.choice([1e-3, 1.0, 1e3])
        c = p + rng.normal(size=n) * rng.choice([0.0, 1e-9, 1e-3, 1.0])
        bound = change_lower_bound(_stats(c), _stats(p), n)
        assert bound is not None and bound <= np.abs(c - p).max() * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("cur, prev, same_digest, want", [
    ([1.0, 2.0], [1.0, 2.0], True, True),                        # equal digests: no change at all
    ([2.0, 4.0], [1.0, 2.0], False, False),                      # the max moved by 2: proven changed
    ([1.0, 2.0 + 1e-6], [1.0, 2.0], False, None),                # within 1e-8 + 1e-5 * 2: cannot tell
    ([1.0, 2.0 + 1e-3], [1.0, 2.0], False, False),               # 1e-3 - 1e-5 * 2 > 1e-8: proven
    ([-1.0, 1.0], [1.0, -1.0], False, None),                     # same max, min, mean and norm: cannot tell
])
def test_unchanged_from_statistics_both_ways(cur, prev, same_digest, want):
    c, p = np.array(cur), np.array(prev)
    got = unchanged_from_statistics(_stats(c), _stats(p), c.size, same_digest, 1e-5, 1e-8)
    assert got is want
    if got is not None:    # what the values say
        assert got == bool(np.all(np.abs(c - p) <= 1e-8 + 1e-5 * np.abs(p)))


def test_the_rtol_term_uses_the_largest_previous_magnitude():
    p = np.array([1000.0, 1.0])
    c = np.array([1000.0, 1.0 + 5e-3])        # |d| = 5e-3 at |p| = 1: changed (5e-3 > 1e-8 + 1e-5)
    # the bound (5e-3 on the max... here only the min moves) minus 1e-5 * 1000 = -5e-3: not proven
    assert unchanged_from_statistics(_stats(c), _stats(p), 2, False, 1e-5, 1e-8) is None
    assert unchanged_from_statistics(_stats(c), _stats(p), 2, False, 0.0, 1e-8) is False
    assert math.isclose(change_lower_bound(_stats(c), _stats(p), 2), 5e-3, rel_tol=1e-9)
