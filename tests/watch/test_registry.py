"""The condition registry is the single source: pinned here, rendered into the README."""
import json
import os

import pytest

from debugger.watch.docs import BEGIN, END, conditions_markdown
from debugger.watch.registry import CONDITIONS, PRESETS, Watchpoint, describe_conditions, preset

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "README.md")
PINNED = os.path.join(HERE, "conditions.json")


def test_registry_matches_the_pinned_list():
    """Changing a condition is deliberate: update tests/watch/conditions.json with it."""
    with open(PINNED, encoding="utf-8") as f:
        assert describe_conditions() == json.load(f)


def test_readme_table_is_generated_from_the_registry():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == conditions_markdown()


def test_mindinsight_names_and_parameters_are_kept():
    names = {p.name for p in CONDITIONS["weight_not_changed"].params}
    assert names == {"rtol", "atol", "whole_layer"}      # whole_layer: tdbg's, unset unless given
    assert {p.name for p in CONDITIONS["weight_change_too_large"].params} == {"abs_mean_update_ratio_gt", "epsilon"}
    assert {p.name for p in CONDITIONS["activation_range"].params} >= {
        "range_start_inclusive", "range_end_inclusive", "range_percentage_lt", "range_percentage_gt",
        "max_min_lt", "max_min_gt"}
    for name in ("gradient_vanishing", "weight_overflow", "gradient_exploding", "tensor_overflow",
                 "weight_too_large", "gradient_too_large", "tensor_too_large", "weight_too_small",
                 "tensor_too_small", "tensor_all_zero", "weight_initialization", "weight_change_too_small",
                 "tensor_range"):
        assert name in CONDITIONS


def test_parse_applies_defaults_only_when_no_threshold_is_given():
    assert Watchpoint.parse("gradient_vanishing").params == {"abs_mean_lt": 1e-9}
    assert Watchpoint.parse("gradient_vanishing:max_lt=3").params == {"max_lt": 3.0}
    w = Watchpoint.parse("weight_change_too_large:epsilon=0.5")
    assert w.params == {"epsilon": 0.5, "abs_mean_update_ratio_gt": 0.1}


@pytest.mark.parametrize("text, message", [
    ("no_such", "unknown condition"),
    ("weight_too_large", "set at least one of"),
    ("gradient_vanishing:abs_mean_lt=abc", "must be a float"),
    ("gradient_vanishing:bogus=1", "has no parameter 'bogus'"),
    ("tensor_all_zero:zero_percentage_ge=101", "must be <= 100"),
    ("tensor_range:range_percentage_gt=5", "needs range_start_inclusive"),
    ("tensor_range:range_start_inclusive=2,range_end_inclusive=1,max_min_gt=1", "> range_end_inclusive"),
    ("tensor_unchanged:num_steps=2.5", "must be an int"),
    ("gradient_vanishing:abs_mean_lt", "expected param=value"),
])
def test_bad_watchpoints_are_refused_with_a_reason(text, message):
    with pytest.raises(ValueError, match=message):
        Watchpoint.parse(text)


def test_from_dict_and_to_dict_round_trip():
    w = Watchpoint.parse("tensor_range:range_start_inclusive=-1,range_end_inclusive=0,range_percentage_gt=99,node=*relu*")
    assert Watchpoint.from_dict(w.to_dict()) == w


def test_every_preset_parses():
    for name in PRESETS:
        assert preset(name)


def test_every_condition_names_a_rule_that_evaluates_it():
    from debugger.watch.rules import RULES, rule_of
    from debugger.watch.registry import SERIES
    from debugger.watch.series_conditions import SERIES_RULES
    over_series = {c.rule for c in CONDITIONS.values() if c.needs == SERIES}
    assert {c.rule for c in CONDITIONS.values()} - over_series == set(RULES)
    assert over_series == set(SERIES_RULES)
    for c in CONDITIONS.values():
        if c.needs != SERIES:
            assert rule_of(c) is RULES[c.rule]
