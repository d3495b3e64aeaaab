"""The order in which XLA's `HloComputation::Accept` visits a computation's instructions
(`xla_visit_order`): what float32 sums follow."""

from __future__ import annotations

from ._frontend import may_have_attribute as _may_have_attribute


# ---------------------------------------------------------------------------
# Visit order


def xla_visit_order(comp) -> list:
    """The order in which XLA's `HloComputation::Accept` visits `comp`'s instructions.

    Unreachable roots (instructions nobody uses, other than the root) come
    first in instruction order, then the root; from each, a depth-first
    post-order over operands (in order) and then control predecessors.
    """
    root = comp.root
    instrs = comp.instructions
    by_name = comp._by_name
    control = _control_successor_names(comp)
    starts = [i for i in instrs if not i.users and i is not root and i.name not in control]
    if root is not None:
        starts.append(root)
    has_control = bool(control)
    done: set = set()
    expanded: set = set()
    order: list = []
    append = order.append
    for start in starts:
        if start in done:
            continue
        stack = [start]
        pop = stack.pop
        push = stack.append
        while stack:
            node = stack[-1]
            if node in done:
                pop()
                continue
            if node in expanded:
                pop()
                done.add(node)
                append(node)
                continue
            expanded.add(node)
            children = node.operands
            if has_control and _may_have_attribute(node, "control-predecessors"):
                children = list(children) + [
                    by_name[n] for n in node.attribute("control-predecessors") if n in by_name
                ]
            for i in range(len(children) - 1, -1, -1):
                c = children[i]
                if c not in done:
                    push(c)
    if len(order) != len(instrs):
        # Instructions reachable only as control successors of dead code: visit in text order.
        for instr in instrs:
            if instr not in done:
                done.add(instr)
                order.append(instr)
    return order


def _is_scheduled(module) -> bool:
    return str(getattr(module, "header_attributes", {}).get("is_scheduled", "")).strip() == "true"


def _control_successor_names(comp) -> set[str]:
    """Names of instructions that some instruction of `comp` lists as a control predecessor."""
    names: set[str] = set()
    for instr in comp.instructions:
        if _may_have_attribute(instr, "control-predecessors"):
            names.update(instr.attribute("control-predecessors"))
    return names
