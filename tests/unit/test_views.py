"""storage/views.py: what storage hands the domain is a frozen copy, never a PynamoDB item.

A view holds every attribute of its model, so storage rebuilds the stored item from it exactly
(``models.own``); a view never follows a later change of the item; and no public function of
storage says it returns a model.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import types
import typing
from typing import Any

import memory_hub.storage as storage_package
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_hub.storage import jobs, views
from memory_hub.storage.models import VIEWED, Job, Record, own, snapshot
from pynamodb.attributes import (
    Attribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.models import Model

WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


def _values_for(attribute: Attribute[Any]) -> st.SearchStrategy[Any]:
    """Values a stored item may hold in this attribute (None where it may be absent)."""
    if isinstance(attribute, MapAttribute):
        value: st.SearchStrategy[Any] = st.dictionaries(WORDS, WORDS, max_size=3)
    elif isinstance(attribute, UnicodeSetAttribute):
        value = st.sets(WORDS, min_size=1, max_size=3)
    elif isinstance(attribute, ListAttribute):
        value = st.lists(WORDS, max_size=3)
    elif isinstance(attribute, JSONAttribute):
        value = st.dictionaries(WORDS, st.integers() | WORDS, max_size=3)
    elif isinstance(attribute, BooleanAttribute):
        value = st.booleans()
    elif isinstance(attribute, NumberAttribute):
        value = st.integers(min_value=-(2**53), max_value=2**53)
    else:
        assert isinstance(attribute, UnicodeAttribute), type(attribute)
        value = WORDS
    if attribute.is_hash_key or attribute.is_range_key or not attribute.null:
        return value
    return st.none() | value


@st.composite
def _stored(draw: st.DrawFn, model: type[Model]) -> Model:
    return model(**{name: draw(_values_for(a)) for name, a in model.get_attributes().items()})


@pytest.mark.parametrize("view", list(VIEWED), ids=lambda v: v.__name__)
def test_a_view_has_every_attribute_of_its_model_and_nothing_else(view: type) -> None:
    assert set(views.names(view)) == set(VIEWED[view].get_attributes())


@pytest.mark.parametrize("view", list(VIEWED), ids=lambda v: v.__name__)
def test_a_view_is_frozen_and_no_model(view: type) -> None:
    model = VIEWED[view]
    shown = snapshot(view, model(**{name: None for name in model.get_attributes()}))
    assert not isinstance(shown, Model)
    assert not hasattr(shown, "save") and not hasattr(shown, "update") and not hasattr(shown, "delete")
    with pytest.raises(dataclasses.FrozenInstanceError):  # what the domain may not do
        setattr(shown, views.names(view)[0], "changed")


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(VIEWED)).flatmap(lambda view: st.tuples(st.just(view), _stored(VIEWED[view]))))
def test_the_item_rebuilt_from_a_view_is_the_item_it_was_taken_from(case: tuple[type, Model]) -> None:
    view, item = case
    shown = snapshot(view, item)
    assert {name: getattr(shown, name) for name in views.names(view)} == {
        name: getattr(item, name) for name in views.names(view)
    }
    rebuilt = own(VIEWED[view], shown)
    assert type(rebuilt) is type(item)
    assert rebuilt.serialize() == item.serialize()  # what a put or a transaction would send


def test_a_view_is_taken_back_only_as_its_own_kind() -> None:
    record = snapshot(views.Record, Record("pk", "atom-1"))
    with pytest.raises(TypeError, match="Record view is not a Job"):
        own(Job, record)
    stored = Record("pk", "atom-2")
    assert own(Record, stored) is stored  # storage's own item is itself


def test_a_view_keeps_what_was_read_and_a_change_answers_the_new_view(aws: object) -> None:
    job = jobs.new("job-views", "export", "memory", "team", "agent", "owner", {})
    claimed = jobs.claim(job, "created")
    assert claimed is not None and (job.state, claimed.state) == ("created", "running")
    assert jobs.claim(job, "created") is None  # it moved on: someone else claimed it
    done = jobs.settle(claimed, "done", result={"counts": {}})
    assert (claimed.state, done.state, done.result) == ("running", "done", {"counts": {}})
    assert jobs.get("job-views").state == "done"  # type: ignore[union-attr]


def _models_in(annotation: Any) -> list[type]:
    """The PynamoDB models an annotation names, at any depth."""
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _public_functions() -> list[tuple[str, Any]]:
    found = []
    for info in pkgutil.iter_modules(storage_package.__path__):
        if info.name == "models":  # the models themselves
            continue
        module = importlib.import_module(f"{storage_package.__name__}.{info.name}")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if isinstance(value, types.FunctionType) or (isinstance(value, type) and dataclasses.is_dataclass(value)):
                found.append((f"{info.name}.{name}", value))
    return found


def test_no_public_function_or_shape_of_storage_hands_out_a_model() -> None:
    """What storage answers the domain is typed by views (the type check holds every caller to it);
    a model in an answer's type would let an item with ``save()`` out."""
    leaks = []
    for name, value in _public_functions():
        if inspect.isclass(value):
            hints = typing.get_type_hints(value)
        else:
            hints = {"return": typing.get_type_hints(value).get("return")}
        leaks += [f"{name}: {key}" for key, hint in hints.items() if _models_in(hint)]
    assert len(_public_functions()) > 100  # every module was read
    assert leaks == []
