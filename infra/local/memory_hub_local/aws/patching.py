"""What every patch of moto shares: ``once(owner, flag)``, so installing twice patches once.

Its own module so the patch modules (``moto_patches``, ``moto_expressions``, ``moto_items``,
``moto_capacity``) import it and not each other: ``moto_patches.install()`` imports the others, and
none of them imports ``moto_patches`` back."""

from __future__ import annotations

from typing import Any


def once(owner: Any, flag: str) -> bool:
    """True the first time ``flag`` is asked of ``owner`` (then marked), False after: a patch
    applied twice would wrap its own wrapper."""
    if getattr(owner, flag, False):
        return False
    setattr(owner, flag, True)
    return True
