"""Schedule names: 1 to :data:`MAX_NAME_LENGTH` printable characters, no space at either
end; the id is ``uuid5(NAME_NAMESPACE, name)``, the group the part before the first dot.
"""

from __future__ import annotations

import uuid

from .errors import InvalidArgument

NAME_NAMESPACE = uuid.UUID("5d0c6f3e-8a3b-4f1e-9c7a-6b2e1d4f8a90")
"""The namespace under which a schedule id is derived from its name.

.. versionadded:: 0.2.0
"""

MAX_NAME_LENGTH = 200
"""The longest name, in characters."""


def check_name(name: object, what: str = "schedule name") -> str:
    """``name`` when it is a valid schedule name, else :class:`InvalidArgument` (calling
    it ``what``)."""
    if not isinstance(name, str):
        raise InvalidArgument(f"a {what} must be a str, got {name!r:.100}")
    if not name:
        raise InvalidArgument(f"a {what} must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"{what} {name[:40]!r}... is {len(name)} characters; at most"
            f" {MAX_NAME_LENGTH} are allowed"
        )
    if not name.isprintable() or name != name.strip():  # a lone surrogate is not printable
        raise InvalidArgument(
            f"{what} {name!r:.100} must be printable characters with no space at either end"
        )
    return name


def name_id(name: str) -> uuid.UUID:
    """The schedule id of ``name``: ``uuid5(NAME_NAMESPACE, name)``.

    .. versionadded:: 0.2.0
    """
    return uuid.uuid5(NAME_NAMESPACE, check_name(name))


def group_of(name: str) -> str | None:
    """The group of ``name``: the text before its first dot, or None without a dot."""
    head, dot, _ = name.partition(".")
    return head if dot and head else None


def check_group(group: object) -> str:
    """A group is a non-empty name without a dot; raise :class:`InvalidArgument` else."""
    text = check_name(group, "group")
    if "." in text:
        raise InvalidArgument(f"a group is the part of a name before its first dot, got {text!r}")
    return text
