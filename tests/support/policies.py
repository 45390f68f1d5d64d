"""Approval policy files for tests, in docs/policy.md's format."""

from __future__ import annotations


def policy_file(*tiers: tuple[int, dict[str, int]], self_approval: tuple[str, ...] = ()) -> str:
    """A policy file's text: a `[[tier]]` for each (dollars above, approvers needed by group), lowest first, then each
    group whose members may approve their own requests."""
    text = "".join(f"[[tier]]\nabove = {above}\nneed = {{ {', '.join(f'{g} = {n}' for g, n in need.items())} }}\n"
                   for above, need in tiers)
    return text + "".join(f"[group.{group}]\nallow_self_approval = true\n" for group in self_approval)
