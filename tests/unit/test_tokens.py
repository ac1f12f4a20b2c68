"""domain/tokens.py (moto in process for the signing secret): a page token carries its position
back only for the filters it was issued for, and a token this deployment never signed — garbled,
truncated, one character changed — is told apart without knowing the filters (``signed``), so a
400 naming other bad fields can name it too."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_hub.domain import tokens
from memory_hub.domain.errors import Invalid

POSITIONS = st.one_of(st.text(max_size=40), st.integers(), st.lists(st.text(max_size=10), max_size=3))
FILTERS = st.dictionaries(st.sampled_from(["team_id", "path_prefix", "action"]), st.text(max_size=20), max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=POSITIONS, filters=FILTERS, at=st.integers(min_value=0))
def test_a_token_answers_its_position_for_its_filters_and_a_changed_one_is_not_signed(aws, position, filters, at):
    token = tokens.encode(position, filters)
    assert tokens.signed(token) and tokens.decode(token, filters) == position
    with pytest.raises(Invalid, match="next_token: invalid"):
        tokens.decode(token, {**filters, "other": "x"})  # genuine, but for other filters
    middle = at % (len(token) - 2) + 1  # not the last character: its low bits may be padding
    changed = token[:middle] + ("B" if token[middle] == "A" else "A") + token[middle + 1 :]
    assert not tokens.signed(changed)
    with pytest.raises(Invalid, match="next_token: invalid"):
        tokens.decode(changed, filters)


@pytest.mark.parametrize("garbage", ["", "garbage", "====", "a" * 200, "é"])
def test_garbage_is_not_signed(aws, garbage):
    assert not tokens.signed(garbage)
