"""The one YAML reader for files a user writes (scenarios, search spaces, custom topologies):
PyYAML's safe loader, made strict and bounded, every failure one line naming the file.

Beyond ``yaml.safe_load`` it

- refuses a key written twice in one mapping (YAML keeps the last);
- refuses a list or mapping used as a key (PyYAML builds it, then fails to hash it);
- takes merge keys (``<<: *defaults``, https://yaml.org/type/merge.html): the mapping's own
  keys override the merged ones, as the spec says;
- refuses nesting deeper than :data:`MAX_DEPTH` (the composer recurses, and so does every
  later walk of the data), and an alias that contains itself;
- refuses a document whose aliases add more than :data:`MAX_ALIAS_VALUES` values to what is
  written (an "alias bomb": nine aliases of nine make 10^9 values from 1 KB of text), counted
  on the composed nodes before anything is built or walked.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from atpsim.errors import AtpsimError

#: The deepest a document may nest (a scenario nests about 6 levels; 400 overflowed the stack).
MAX_DEPTH = 64
#: The most values (each scalar, list and mapping one) a document's aliases may add to what is
#: written once they are expanded; a document as written is bounded by its text.
MAX_ALIAS_VALUES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """SafeLoader with the checks of the module docstring."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", mark)  # fmt: skip
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    """The mapping of *node*, its own keys checked (scalars, each once) before PyYAML merges
    the ``<<`` keys in and builds it."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
            raise yaml.constructor.ConstructorError(
                None, None, f"a {kind} used as a key; expected a name or a number",
                key_node.start_mark)  # fmt: skip
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(text: str, source: str, error_type: type[AtpsimError] = AtpsimError) -> Any:
    """The YAML document *text* (read from *source*), checked as the module docstring says; an
    *error_type* naming *source* (and the line and column where known) for any failure."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise error_type(yaml_message(error), source=source) from None
    finally:
        loader.dispose()


def check_expansion(root: yaml.Node) -> None:
    """Refuse (a ComposerError at the alias's target) a document whose aliases add more than
    :data:`MAX_ALIAS_VALUES` values to it, or an alias that contains itself. Each node's
    expanded size is counted once (memoized), without recursion, so a bomb is measured in
    the time of its text."""
    size: dict[int, int] = {}
    limit = _count_nodes(root) + MAX_ALIAS_VALUES
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > limit:
                raise yaml.composer.ComposerError(
                    None, None, f"its aliases add more than {MAX_ALIAS_VALUES:,} values to the "
                    "document (an alias bomb?); expected fewer repeats of an anchor",
                    node.start_mark)  # fmt: skip
            continue
        if key in size:
            continue
        if key in on_path:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a node that contains it", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _count_nodes(root: yaml.Node) -> int:
    """The distinct nodes of the document, each alias's target once: its size as written."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(_children(node))
    return len(seen)


def yaml_message(error: yaml.YAMLError) -> str:
    """``line L, column C: invalid YAML: <problem>`` for a PyYAML *error*."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"{where}invalid YAML: {problem}"


#: Hex digits of a file's SHA-256 that :func:`file_digest` keeps (64 bits: two different
#: files of one sweep share a digest with odds of about 1 in 10^19).
DIGEST_HEX_DIGITS = 16


def file_digest(path: str | Path) -> str | None:
    """The first :data:`DIGEST_HEX_DIGITS` hex digits of the SHA-256 of the bytes of the
    file *path*, None where there is no readable file there. What a result computed from a
    user's file (a hardware profile, a custom topology) is keyed on, so that editing the file
    is seen: its path alone names whatever the file says today."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()[:DIGEST_HEX_DIGITS]
