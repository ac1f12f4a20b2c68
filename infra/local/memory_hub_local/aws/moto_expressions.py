"""Changes to moto's DynamoDB expression handling, installed by ``moto_patches.install()`` and held to
the same rules (tests/contract/test_moto_patches.py: moto alone lacks each one; patched answers are
moto's own, errors included).

- ``parsed_expressions``: moto parses a ConditionExpression anew on every request (twice for an
  UpdateItem, once per action of a transaction) and an UpdateExpression up to three times a request;
  here each expression string is parsed once (LRU-bounded) and each request fills in its own
  ExpressionAttributeNames/Values, in moto's order, with moto's own lookups (the same errors).
  moto's validator deep-copies an UpdateExpression before it changes it; here the copy is made
  node by node (the same tree, ~2.5x faster than ``copy.deepcopy``).
- ``fast_traversal``: moto validates an UpdateExpression with ten walks over its tree; at every node
  each walk rebuilds its table of node classes and asks ``isinstance`` of abc classes (ABCMeta's
  slow path) — a SET of 8 attributes took ~4 ms. Here each walk's table is made once and the
  answer for a node class is kept (moto's node classes have no virtual subclasses); ~35% less.
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

from .patching import once


def install() -> None:
    parsed_expressions()
    fast_traversal()


def _untyped(module: str) -> Any:
    """A module of moto's that declares no types (its expression parsing is ``# type: ignore``)."""
    return importlib.import_module(module)


# ---------------------------------------------------------------- parsed expressions

EXPRESSIONS_KEPT = 1024  # distinct expression strings kept parsed (the service sends a few dozen)


class _Slot(NamedTuple):
    """Where a parse looked up an ExpressionAttributeName (``#n``) or Value (``:v``): the n-th lookup."""

    at: int


class _ConditionTemplate(NamedTuple):
    tree: Any  # moto's syntax tree, a _Slot where each looked-up name or value goes
    lookups: tuple[tuple[bool, str], ...]  # (is a value, placeholder), in the order moto looks them up
    names_found: tuple[str, ...]
    values_found: tuple[str, ...]


def _condition_template(parser_class: Any, original_parse: Callable[[Any], Any], expression: str) -> Any:
    """moto's own parse of ``expression`` with every name and value lookup recorded and answered by a
    _Slot; None when the parse fails (moto then parses each time, so it raises what it raises)."""
    lookups: list[tuple[bool, str]] = []
    trees: list[Any] = []

    class Recorder(parser_class):  # type: ignore[misc]
        def _lookup_expression_attribute_value(self, name: str) -> Any:
            lookups.append((True, name))
            return _Slot(len(lookups) - 1)

        def _lookup_expression_attribute_name(self, name: str) -> Any:
            lookups.append((False, name))
            return _Slot(len(lookups) - 1)

        def _make_op_condition(self, node: Any) -> Any:
            trees.append(node)  # the tree as moto would build its condition from it
            return None

    recorder = Recorder(expression, None, None)
    try:
        original_parse(recorder)
    except Exception:  # noqa: BLE001 - moto's own parse raises it again, request by request
        return None
    return _ConditionTemplate(
        trees[0], tuple(lookups), tuple(recorder.expr_attr_names_found), tuple(recorder.expr_attr_values_found)
    )


def _filled(node: Any, found: list[Any]) -> Any:
    """The template's tree with this request's names and values in place of its slots."""
    if isinstance(node.value, _Slot):
        return node._replace(value=found[node.value.at])
    if not node.children:
        return node
    return node._replace(children=[_filled(child, found) for child in node.children])


def parsed_expressions() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    validators = _untyped("moto.dynamodb.parsing.validators")
    parser = _untyped("moto.dynamodb.parsing.expressions").UpdateExpressionParser

    if not once(ConditionExpressionParser, "_memory_hub_parsed_expressions"):
        return
    original_parse = ConditionExpressionParser.parse
    template = functools.lru_cache(maxsize=EXPRESSIONS_KEPT)(
        functools.partial(_condition_template, ConditionExpressionParser, original_parse)
    )

    def parse(self: Any) -> Any:
        expression = self.condition_expression
        plain = type(self) is ConditionExpressionParser and isinstance(expression, str)
        kept = template(expression) if plain and expression else None
        if kept is None:
            return original_parse(self)
        found = [
            self._lookup_expression_attribute_value(name) if value else self._lookup_expression_attribute_name(name)
            for value, name in kept.lookups
        ]
        self.expr_attr_names_found.extend(kept.names_found)
        self.expr_attr_values_found.extend(kept.values_found)
        return self._make_op_condition(_filled(kept.tree, found))

    ConditionExpressionParser.parse = parse  # type: ignore[method-assign]

    # moto never changes a parsed UpdateExpression: its validator works on a deep copy of it.
    original_make = parser.make.__func__
    parsed = functools.lru_cache(maxsize=EXPRESSIONS_KEPT)(original_make)

    def make(cls: Any, expression: Any) -> Any:
        return (parsed if type(expression) is str else original_make)(cls, expression)

    parser.make = classmethod(make)
    validators.deepcopy = _tree_copy


_ATOMIC = frozenset({str, int, float, bool, type(None)})  # what deepcopy hands back as it is


_KINDS: dict[tuple[Any, Any], bool] = {}


def _is_a(node_type: Any, kind: Any) -> bool:
    """``isinstance`` for an object of ``node_type``, asked once per pair of classes: moto's nodes
    are abc classes (every isinstance goes through ABCMeta) and none has a virtual subclass."""
    answer = _KINDS.get((node_type, kind))
    if answer is None:
        answer = _KINDS[node_type, kind] = issubclass(node_type, kind)
    return answer


@functools.cache
def _ast_nodes() -> Any:
    return _untyped("moto.dynamodb.parsing.ast_nodes")


_PLAIN: dict[Any, bool] = {}


def _plain_class(cls: Any) -> bool:
    """Whether deepcopy copies an object of ``cls`` as new object + deep copy of its ``__dict__``
    (no copy hook of its own, no slots)."""
    import copyreg

    if cls not in _PLAIN:
        hooks = ("__deepcopy__", "__setstate__", "__slots__")
        methods = ("__reduce_ex__", "__reduce__", "__getstate__")
        _PLAIN[cls] = (
            cls not in copyreg.dispatch_table
            and not any(hasattr(cls, hook) for hook in hooks)
            and all(getattr(cls, name) is getattr(object, name) for name in methods)
        )
    return _PLAIN[cls]


def _tree_copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy`` of an UpdateExpression's tree, made directly: a node's attributes (its
    type, children, parent) are copied as deepcopy copies them; anything else goes to deepcopy."""
    memo = {} if memo is None else memo
    made = memo.get(id(value))
    if made is not None:
        return made
    if type(value) in _ATOMIC:
        return value
    if type(value) is list:
        items: list[Any] = []
        memo[id(value)] = items
        items.extend([_tree_copy(item, memo) for item in value])
        return items
    if _is_a(type(value), _ast_nodes().Node) and _plain_class(type(value)):
        node = object.__new__(type(value))
        memo[id(value)] = node
        node.__dict__.update({name: _tree_copy(attribute, memo) for name, attribute in value.__dict__.items()})
        return node
    return copy.deepcopy(value, memo)


# ---------------------------------------------------------------- fast traversal


def _processor(traverser: Any, node_type: type) -> Any:
    """The function of ``traverser._processing_map()`` that moto's ``process`` would call for a node
    of ``node_type`` (the first whose class it is an instance of), or None when it processes none."""
    kept = traverser.__dict__.get("_memory_hub_processors")
    if kept is None:  # moto's walks answer the same table every time
        kept = traverser.__dict__["_memory_hub_processors"] = (tuple(traverser._processing_map().items()), {})
    kinds, chosen = kept
    if node_type not in chosen:
        chosen[node_type] = next((function for kind, function in kinds if _is_a(node_type, kind)), None)
    return chosen[node_type]


def fast_traversal() -> None:
    ast_nodes = _ast_nodes()

    traverser, node_class = ast_nodes.DepthFirstTraverser, ast_nodes.Node
    if not once(traverser, "_memory_hub_fast_traversal"):
        return
    original_traverse = traverser.traverse_node_recursively
    expression, function = ast_nodes.Expression, ast_nodes.UpdateExpressionFunction

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        if type(self).process is not traverser.process or type(self).nodes_to_be_processed is not (
            traverser.nodes_to_be_processed
        ):
            return original_traverse(self, node, child_id)
        if _is_a(type(node), node_class):
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    self.pre_processing_of_child(node, i)
                    self.traverse_node_recursively(child_node, i)
            processor = _processor(self, type(node))
            if processor is not None:
                node = processor(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    traverser.traverse_node_recursively = traverse_node_recursively
    node_class.find_clauses = _clause_finder(expression, function)


def _clause_finder(expression: type, function: type) -> Any:
    """moto's ``Node.find_clauses`` with the class answers kept (``_is_a``)."""

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses = []
        for child in self.children or []:
            if type(child) in clause_types:
                clauses.append(child)
            elif _is_a(type(child), expression) or _is_a(type(child), function):
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    return find_clauses
