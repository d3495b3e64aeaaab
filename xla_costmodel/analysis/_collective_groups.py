"""Who takes part in a collective: replica groups, group modes and participant counts, as XLA reads them.

References (openxla/xla@6b73c4c49eb0): `xla/hlo/ir/collective_op_group_mode.cc`
(`GetCollectiveOpGroupMode`), `xla/service/collective_ops_utils.cc`
(`GetPariticipantCountsForReplicaGroups`, `GetReplicaGroupCountAndSize`),
`xla/hlo/ir/replica_group.cc` (`IotaReplicaGroupList`).

- `replica_groups={{0,1},{2,3}}` lists the groups; `replica_groups={}` means
  one group of every replica (every partition in cross-partition mode);
  `replica_groups=[G,S]<=[d1,d2,...]T(p1,p2,...)` is XLA's iota form: iota
  over the product of the `d`s, reshaped to `d`, transposed by `p` (identity
  when there is no `T(...)`), reshaped to G rows of S: the rows are the groups.
- `replica_groups=mesh['a'=2,'b'=4] {'a'}` (optionally with
  `, device_ids=(...)` after the mesh, as a list or in iota form) is XLA's
  mesh-axes form (`MeshAxesReplicaGroupList`, what JAX's sharded programs now
  carry): the devices laid out on the mesh, one group per combination of the
  axes not named, the named axes (in their order) varying within a group; a
  sub-axis `'b':(p)s` is the size-s part of axis b after a stride of p.
- The group mode follows from `channel_id` and `use_global_device_ids`
  (only all-reduce, reduce-scatter and all-gather have the flag):

  | channel_id | use_global_device_ids | mode |
  |---|---|---|
  | absent | unset or false | cross-replica |
  | absent | true | an error |
  | present | (no such flag) | cross-partition |
  | present | false | cross-replica-and-partition |
  | present | true | flattened-id |

- Participants per group: the group's size; in cross-replica mode each group
  is counted once per partition, in cross-replica-and-partition mode its
  size is multiplied by the number of partitions.
- The replica and partition counts are the module's (`replica_count`,
  `num_partitions` in the `HloModule` header; 1 when absent, as in XLA's
  `HloModuleConfig`).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "CollectiveGroupError",
    "group_count_and_size",
    "group_mode",
    "iota_groups",
    "is_iota",
    "mesh_groups",
    "module_counts",
    "participant_counts",
    "replica_groups",
    "source_target_pairs",
]

# Opcodes whose instruction class carries `use_global_device_ids` (XLA's
# HloAllGatherInstruction and HloAllReduceInstructionBase).
_GLOBAL_IDS_OPCODES = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter", "all-gather", "all-gather-start"})

_IOTA = re.compile(r"^\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=\s*\[([\d\s,]*)\]\s*(?:T\(([\d\s,]*)\))?\s*$")


class CollectiveGroupError(ValueError):
    """A collective's groups cannot be read or are inconsistent (the message names the instruction)."""


def _where(instr) -> str:
    return f"'{instr.name}' ({instr.opcode})"


def iota_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """The groups of XLA's iota form `[G,S]<=[d...]T(p...)`."""
    m = _IOTA.match(text.strip())
    if m is None:
        raise ValueError(f"not an iota replica group list: {text!r}")
    groups, size = int(m.group(1)), int(m.group(2))
    dims = [int(x) for x in m.group(3).split(",") if x.strip()]
    perm = [int(x) for x in m.group(4).split(",") if x.strip()] if m.group(4) is not None else list(range(len(dims)))
    if sorted(perm) != list(range(len(dims))):
        raise ValueError(f"{text!r}: T({','.join(map(str, perm))}) is not a permutation of {len(dims)} dimensions")
    total = math.prod(dims)
    if total != groups * size:
        raise ValueError(f"{text!r}: {groups}x{size} groups but {total} devices")
    # iota reshaped to dims, transposed by perm, flattened: index arithmetic instead of arrays.
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    tdims = [dims[p] for p in perm]
    order = []
    for flat in range(total):
        rem, value = flat, 0
        for j in range(len(tdims) - 1, -1, -1):
            coord = rem % tdims[j]
            rem //= tdims[j]
            value += coord * strides[perm[j]]
        order.append(value)
    return tuple(tuple(order[g * size:(g + 1) * size]) for g in range(groups))


def _list_groups(text: str) -> tuple[tuple[int, ...], ...]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"not a replica group list: {text!r}")
    inner = body[1:-1].strip()
    if not inner:
        return ()
    groups = re.findall(r"\{([^{}]*)\}", inner)
    if re.sub(r"\{[^{}]*\}", "", inner).replace(",", "").strip():
        raise ValueError(f"not a replica group list: {text!r}")
    return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in groups)


def _split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside quotes, brackets and parentheses."""
    parts, depth, quote, cur = [], 0, False, []
    for ch in text:
        if ch == "'":
            quote = not quote
        elif not quote and ch in "([{":
            depth += 1
        elif not quote and ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0 and not quote:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _iota_ids(text: str) -> list[int]:
    """Device ids of a tile-assignment iota `[d...]T(p...)` (or `[d...]`): iota, reshape, transpose, flatten."""
    import numpy as np

    m = re.match(r"^\[([\d\s,]*)\]\s*(?:T\(([\d\s,]*)\))?$", text.strip())
    if m is None:
        raise ValueError(f"not an iota device list: {text!r}")
    dims = [int(x) for x in m.group(1).split(",") if x.strip()]
    perm = [int(x) for x in m.group(2).split(",") if x.strip()] if m.group(2) else list(range(len(dims)))
    return [int(v) for v in np.arange(math.prod(dims)).reshape(dims).transpose(perm).ravel()]


def mesh_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """The groups of XLA's mesh-axes form `mesh['a'=2,'b'=4][, device_ids=(...)] {'a', 'b':(2)2}`."""
    import numpy as np

    body = text.strip()
    m = re.match(r"^mesh\[([^\]]*)\]", body)
    if m is None:
        raise ValueError(f"not a mesh-axes replica group list: {text!r}")
    names, sizes = [], []
    for item in _split_top(m.group(1)):
        am = re.match(r"^'(.*)'\s*=\s*(\d+)$", item)
        if am is None:
            raise ValueError(f"{text!r}: mesh axis {item!r} is not 'name'=size")
        names.append(am.group(1))
        sizes.append(int(am.group(2)))
    rest = body[m.end():].strip()
    ids = list(range(math.prod(sizes)))
    if rest.startswith(","):
        dm = re.match(r"^,\s*device_ids=\(", rest)
        if dm is None:
            raise ValueError(f"{text!r}: expected ', device_ids=(...)' after the mesh")
        depth, end = 1, dm.end()
        while end < len(rest) and depth:
            depth += {"(": 1, ")": -1}.get(rest[end], 0)
            end += 1
        inner = rest[dm.end():end - 1].strip()
        ids = _iota_ids(inner) if inner.startswith("[") else [int(x) for x in inner.split(",") if x.strip()]
        rest = rest[end:].strip()
    if len(ids) != math.prod(sizes):
        raise ValueError(f"{text!r}: {len(ids)} device ids for a mesh of {math.prod(sizes)}")
    if not (rest.startswith("{") and rest.endswith("}")):
        raise ValueError(f"{text!r}: expected the grouped axes in braces after the mesh")
    refs = []  # (mesh axis, pre size, size) in the order written
    for item in _split_top(rest[1:-1]):
        am = re.match(r"^'(.*)'\s*(?::\((\d+)\)(\d+))?$", item)
        if am is None or am.group(1) not in names:
            raise ValueError(f"{text!r}: grouped axis {item!r} is not an axis of the mesh")
        dim = names.index(am.group(1))
        refs.append((dim, int(am.group(2)), int(am.group(3))) if am.group(2) else (dim, None, sizes[dim]))
    # Per mesh axis: its reshape and, per reference to it, the reshaped axis it groups over.
    reshape, grouped = [], {}
    for dim, full in enumerate(sizes):
        mine = [(i, r) for i, r in enumerate(refs) if r[0] == dim]
        offset = len(reshape)
        if not mine:
            reshape.append(full)
        elif len(mine) == 1 and mine[0][1][1] is None:
            reshape.append(full)
            grouped[mine[0][0]] = offset
        else:
            prefix, local = 1, 0
            for i, (_, pre, size) in sorted(mine, key=lambda x: x[1][1] or 1):
                pre = pre or 1
                if pre != prefix:
                    reshape.append(pre // prefix)
                    local += 1
                    prefix *= pre // prefix
                reshape.append(size)
                grouped[i] = offset + local
                local += 1
                prefix *= size
            if prefix != full:
                reshape.append(full // prefix)
    order = [grouped[i] for i in range(len(refs))]
    perm = [d for d in range(len(reshape)) if d not in order] + order
    size = math.prod(refs[i][2] for i in range(len(refs))) if refs else 1
    flat = np.asarray(ids).reshape(reshape).transpose(perm).ravel()
    return tuple(tuple(int(v) for v in flat[g:g + size]) for g in range(0, len(flat), size))


def replica_groups(instr) -> tuple[tuple[int, ...], ...] | None:
    """The groups of a collective as lists of ids: `()` for `replica_groups={}`, None when it has none.

    Raises `CollectiveGroupError` naming the instruction for text that is neither form.
    """
    if not instr.has_attribute("replica_groups"):
        return None
    text = instr.raw_attributes.get("replica_groups", "").strip()
    try:
        if text.startswith("mesh"):
            return mesh_groups(text)
        return iota_groups(text) if text.startswith("[") else _list_groups(text)
    except ValueError as exc:
        raise CollectiveGroupError(f"{_where(instr)}: replica_groups: {exc}") from None


def is_iota(instr) -> bool:
    """Whether the groups are written in XLA's iota form."""
    return instr.has_attribute("replica_groups") and instr.raw_attributes.get("replica_groups", "").strip().startswith("[")


def source_target_pairs(instr) -> tuple[tuple[int, int], ...]:
    """A collective-permute's (or send's / recv's) `source_target_pairs`; `()` when absent."""
    if not instr.has_attribute("source_target_pairs"):
        return ()
    text = instr.raw_attributes.get("source_target_pairs", "")
    pairs = re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", text)
    return tuple((int(a), int(b)) for a, b in pairs)


def module_counts(instr, module=None) -> tuple[int, int]:
    """`(replica_count, num_partitions)` of `module`, by default the module holding `instr`
    (1, 1 when not stated)."""
    if module is None:
        comp = instr.computation
        module = comp.module if comp is not None else None
    header = getattr(module, "header_attributes", None) or {}

    def count(key: str) -> int:
        try:
            return max(int(str(header.get(key, "1")).strip()), 1)
        except ValueError:
            return 1

    return count("replica_count"), count("num_partitions")


def group_mode(instr) -> str:
    """`"cross_replica"`, `"cross_partition"`, `"cross_replica_and_partition"` or `"flattened_id"` (table above)."""
    has_channel = instr.has_attribute("channel_id")
    if instr.opcode in _GLOBAL_IDS_OPCODES:
        global_ids = bool(instr.attribute("use_global_device_ids", False)) if instr.has_attribute(
            "use_global_device_ids") else False
        if not has_channel:
            if global_ids:
                raise CollectiveGroupError(f"{_where(instr)}: use_global_device_ids=true needs a channel_id")
            return "cross_replica"
        return "flattened_id" if global_ids else "cross_replica_and_partition"
    return "cross_partition" if has_channel else "cross_replica"


def participant_counts(instr, replicas: int | None = None, partitions: int | None = None) -> list[int]:
    """XLA's `GetPariticipantCountsForReplicaGroups`: the participants of each group (see the module docstring).

    **Arguments:** `instr`; `replicas`, `partitions`: the module's counts
    (default: read from the module header).
    """
    if replicas is None or partitions is None:
        r, p = module_counts(instr)
        replicas = r if replicas is None else replicas
        partitions = p if partitions is None else partitions
    mode = group_mode(instr)
    groups = replica_groups(instr) or ()
    if not groups:
        if mode == "flattened_id":
            raise CollectiveGroupError(f"{_where(instr)}: replica groups cannot be empty with use_global_device_ids")
        n = partitions if mode == "cross_partition" else replicas
        groups = (tuple(range(n)),)
    if mode == "cross_replica":
        return [len(g) for g in groups for _ in range(partitions)]
    if mode == "cross_replica_and_partition":
        return [len(g) * partitions for g in groups]
    return [len(g) for g in groups]


def group_count_and_size(instr) -> tuple[int, int] | None:
    """XLA's `GetReplicaGroupCountAndSize`: `(groups, participants per group)`; None when sizes differ.

    The iota form gives its `[G,S]` directly, whatever the group mode (as in XLA).
    """
    if is_iota(instr):
        groups = replica_groups(instr)
        return len(groups), len(groups[0]) if groups else 0
    counts = participant_counts(instr)
    if any(c != counts[0] for c in counts):
        return None
    return len(counts), counts[0]
