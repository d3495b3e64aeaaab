"""Collectives in the GPU models: groups, XLA's collective models and the measured table.

References (openxla/xla@6b73c4c4): `collective_ops_utils.cc` and
`collective_op_group_mode.cc` (group modes, participant counts),
`replica_group.cc` (iota device lists), `sol_gpu_cost_model_test.cc` (the SoL
check values), `collective_interpolator_test.cc` (49.312 µs / 45.024 µs),
`gpu_collective_performance_model.cc` (worked by hand below).
"""

from __future__ import annotations

import math
import warnings

import pytest

from xla_costmodel.hlo import HloParseError

import xla_costmodel as xc
from xla_costmodel.analysis._collective_groups import (
    CollectiveGroupError,
    group_count_and_size,
    group_mode,
    iota_groups,
    participant_counts,
    replica_groups,
)
from xla_costmodel.devices import collective_row_hlo, collective_table, get_device
from xla_costmodel.models._collective_sol import SolConfig, SolModel, sol_config
from xla_costmodel.models._collectives import communication_type, describe_collective, permute_type

H100, B200 = get_device("h100-sxm"), get_device("b200")
ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"


def module(body: str, header: str = "") -> xc.HloModule:
    return xc.parse_hlo(f"HloModule m{header}\n\n{ADD}\nENTRY e {{\n{body}\n}}")


def one(op_text: str, header: str = "", param: str = "f32[1024]"):
    return module(f"  p = {param} parameter(0)\n  ROOT r = {op_text}", header).entry.root


# ---------------------------------------------------------------- groups


def test_iota_groups():
    assert iota_groups("[1,8]<=[8]") == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert iota_groups("[2,4]<=[8]") == ((0, 1, 2, 3), (4, 5, 6, 7))
    # reshape to [2,4], transpose: the columns become the groups
    assert iota_groups("[4,2]<=[2,4]T(1,0)") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert iota_groups("[2,4]<=[4,2]T(1,0)") == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert iota_groups("[2,4]<=[2,2,2]T(2,1,0)") == ((0, 4, 2, 6), (1, 5, 3, 7))
    with pytest.raises(ValueError, match="groups but 6 devices"):
        iota_groups("[2,4]<=[6]")


def test_mesh_axes_groups():
    # XLA's MeshAxesReplicaGroupList (replica_group.cc), worked by hand: devices laid out on the mesh,
    # the named axes varying within a group.
    from xla_costmodel.analysis._collective_groups import mesh_groups

    assert mesh_groups("mesh['x'=2,'y'=4] {'x'}") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert mesh_groups("mesh['x'=2,'y'=4] {'y'}") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert mesh_groups("mesh['x'=2,'y'=4] {'y','x'}") == ((0, 4, 1, 5, 2, 6, 3, 7),)
    # sub-axes: a:(2)2 is the middle factor of 8 = 2 x 2 x 2 (stride 2)
    assert mesh_groups("mesh['a'=8] {'a':(2)2}") == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert mesh_groups("mesh['a'=8] {'a':(1)2,'a':(4)2}") == ((0, 1, 4, 5), (2, 3, 6, 7))
    # explicit device ids, as a list or as an iota
    assert mesh_groups("mesh['a'=4], device_ids=(3,2,1,0) {'a'}") == ((3, 2, 1, 0),)
    assert mesh_groups("mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a'}") == ((0, 1), (2, 3), (4, 5), (6, 7))
    k = one("f32[1024] all-reduce(p), to_apply=add, replica_groups=mesh['x'=2,'y'=4] {'x'}, channel_id=1, "
            "use_global_device_ids=true", ", num_partitions=8")
    assert group_count_and_size(k) == (4, 2)
    # an axis the mesh lacks: XLA's parser refuses the module, and so does ours (at the attribute)
    with pytest.raises(HloParseError, match="axis 'z' is not a valid axis name or index in the mesh"):
        one("f32[1024] all-reduce(p), to_apply=add, replica_groups=mesh['x'=2] {'z'}, channel_id=1, "
            "use_global_device_ids=true")
    # read without the parser's check, the group reader refuses it too
    with pytest.raises(ValueError, match="not an axis of the mesh"):
        mesh_groups("mesh['x'=2] {'z'}")


@pytest.mark.parametrize("attrs, mode", [
    ("replica_groups={}", "cross_replica"),
    ("replica_groups={}, channel_id=1", "cross_replica_and_partition"),
    ("replica_groups={{0,1}}, channel_id=1, use_global_device_ids=true", "flattened_id"),
])
def test_group_modes_of_all_reduce(attrs, mode):
    assert group_mode(one(f"f32[1024] all-reduce(p), to_apply=add, {attrs}")) == mode


def test_group_modes_without_the_flag():
    # all-to-all and collective-permute never pass use_global_device_ids: a channel means cross-partition
    assert group_mode(one("f32[1024] all-to-all(p), replica_groups={{0,1}}, dimensions={0}, channel_id=1")) == \
        "cross_partition"
    assert group_mode(one("f32[1024] all-to-all(p), replica_groups={{0,1}}, dimensions={0}")) == "cross_replica"
    # the flag without a channel: XLA's parser refuses the instruction, and so does ours
    with pytest.raises(HloParseError, match="Cannot have use_global_device_ids=true without channel_id"):
        one("f32[1024] all-reduce(p), to_apply=add, replica_groups={{0,1}}, use_global_device_ids=true")


def test_participant_counts_follow_xla():
    hdr = ", replica_count=2, num_partitions=4"
    # cross-replica: each group once per partition
    ar = one("f32[1024] all-reduce(p), to_apply=add, replica_groups={{0,1}}", hdr)
    assert participant_counts(ar) == [2, 2, 2, 2]
    assert group_count_and_size(ar) == (4, 2)
    # cross-replica-and-partition: group size x partitions; empty groups: all replicas
    ar = one("f32[1024] all-reduce(p), to_apply=add, replica_groups={}, channel_id=1", hdr)
    assert participant_counts(ar) == [8]
    # cross-partition (all-to-all with a channel), empty groups: all partitions
    a2a = one("f32[1024] all-to-all(p), replica_groups={}, dimensions={0}, channel_id=1", hdr)
    assert participant_counts(a2a) == [4]
    # flattened ids: the groups as written; groups of different sizes have no common size
    ar = one("f32[1024] all-reduce(p), to_apply=add, replica_groups={{0,1,2},{3,4}}, channel_id=1, "
             "use_global_device_ids=true", hdr)
    assert participant_counts(ar) == [3, 2] and group_count_and_size(ar) is None
    with pytest.raises(CollectiveGroupError, match="cannot be empty"):
        participant_counts(one("f32[1024] all-reduce(p), to_apply=add, replica_groups={}, channel_id=1, "
                               "use_global_device_ids=true", hdr))


def test_num_ranks_in_the_gpu_cost_analysis_reads_the_module_counts():
    m = module("  p = f32[1024] parameter(0)\n"
               "  ROOT r = f32[1024] all-reduce(p), to_apply=add, replica_groups={}, channel_id=1",
               ", replica_count=1, num_partitions=8")
    a = xc.gpu_cost_analysis(m, "h100-sxm")
    assert a.num_of_devices("r") == 8
    assert a.scaling_ratio("r") == pytest.approx(8 / 14)  # N / (2(N-1)) for an all-reduce


# ---------------------------------------------------------------- XLA's SoL model

SOL = SolModel(SolConfig(nccl_op_launch_s=100e-6, nic_speed_gbps=100, chunk_prep_s=100e-6, rtt_s=100e-6,
                         gpus_per_node=8, chunk_size_bytes=4 << 20))
EIGHT_MB = 8 << 20


@pytest.mark.parametrize("kind, nodes, expected_us", [
    ("all-gather", 1, 284), ("all-gather", 2, 485), ("all-gather", 4, 885),
    ("all-reduce", 1, 468), ("all-reduce", 2, 870), ("all-reduce", 4, 1670),
    ("reduce-scatter", 1, 284), ("reduce-scatter", 2, 485), ("reduce-scatter", 4, 885),
    ("send-recv", 1, 292), ("send-recv", 2, 485),
    ("all-to-all", 1, 100), ("all-to-all", 2, 1745), ("all-to-all", 4, 4966),
])
def test_sol_model_check_values(kind, nodes, expected_us):
    # sol_gpu_cost_model_test.cc: launch, chunk preparation and RTT 100 µs, NIC 100 GB/s, 8 MiB.
    t = SOL.all_to_all_latency(EIGHT_MB, nodes) if kind == "all-to-all" else SOL.ring_latency(EIGHT_MB, nodes, kind)
    assert math.floor(t * 1e6 + 1e-9) == expected_us


def test_sol_intra_node_all_reduce_and_configs():
    sol = SolModel(SolConfig(nccl_op_launch_s=100e-6, nic_speed_gbps=50, chunk_prep_s=10e-6, rtt_s=30e-6,
                             nvlink_bw_per_lane_gbps=20.0, nvlink_barrier_s=1.5e-6))
    assert math.floor(sol.intra_node_all_reduce_latency(128 << 10, 8, 18) * 1e6) == 5  # one-shot
    assert math.floor(sol.intra_node_all_reduce_latency(1 << 20, 8, 18) * 1e6) == 9    # two-shot
    with pytest.raises(ValueError, match="NVLink"):
        sol.intra_node_all_reduce_latency(128 << 10, 8, 0)
    # SolGPUCostModelGetConfigTest: int(NIC) 25 (H100), 50 (B200 and any other name); B200 prep 2 µs +- 10 ns
    assert int(sol_config(H100).nic_speed_gbps) == 25
    assert int(sol_config(B200).nic_speed_gbps) == 50
    assert abs(sol_config(B200).chunk_prep_s - 2e-6) < 10e-9
    assert int(sol_config(get_device("h200")).nic_speed_gbps) == 50
    assert sol_config(H100).nvlink_bw_per_lane_gbps == 20.0 and sol_config(B200).nvlink_bw_per_lane_gbps == 40.0


# ---------------------------------------------------------------- communication and permute types


def test_communication_types():
    hdr = ", replica_count=1, num_partitions=16"
    c = describe_collective(one("f32[1024] all-reduce(p), to_apply=add, replica_groups=[2,8]<=[16], channel_id=1, "
                                "use_global_device_ids=true", hdr), H100)
    assert communication_type(c, 8) == "single_partition"
    c = describe_collective(one("f32[1024] all-reduce(p), to_apply=add, replica_groups=[1,16]<=[16], channel_id=1, "
                                "use_global_device_ids=true", hdr), H100)
    assert communication_type(c, 8) == "multi_host_world_level"
    c = describe_collective(one("f32[1024] all-reduce(p), to_apply=add, replica_groups=[8,2]<=[2,8]T(1,0), "
                                "channel_id=1, use_global_device_ids=true", hdr), H100)
    assert communication_type(c, 8) == "multi_host_non_world_level"


def test_permute_types_of_the_table_patterns():
    ring = tuple((i, (i + 1) % 8) for i in range(8))
    swap = tuple(p for i in range(0, 8, 2) for p in ((i, i + 1), (i + 1, i)))
    one_way = tuple((i, i + 4) for i in range(4))
    assert permute_type(ring, 8) == "intra_partition_two_way_has_non_mutual"
    assert permute_type(swap, 8) == "intra_partition_two_way_all_mutual"
    assert permute_type(one_way, 8) == "intra_partition_one_way"
    assert permute_type(one_way, 4) == "inter_partition_one_way"
    assert permute_type((), 8) is None


# ---------------------------------------------------------------- the models

AR_1KIB = ("f32[256] all-reduce(p), to_apply=add, replica_groups=[1,8]<=[8], use_global_device_ids=true, "
           "channel_id=1")


@pytest.mark.parametrize("interpolation", ["xla", "log-bytes"])
@pytest.mark.parametrize("device, expected_us", [(H100, 49.312), (B200, 45.024)])
def test_collective_interpolator_check_values(interpolation, device, expected_us):
    # collective_interpolator_test.cc LoadsDefaultProfile: f32[256] all-reduce over [1,8]<=[8].
    model = xc.get_model("xla-gpu-tables", collective_interpolation=interpolation)
    e = model.estimate(one(AR_1KIB, param="f32[256]"), device)
    assert e.time_s * 1e6 == pytest.approx(expected_us, abs=5e-4)
    assert e.bound == "network" and "collective table" in e.details["rule"]


def test_xla_ring_model_worked_by_hand():
    # f32[268435456] (1 GiB) all-reduce over 8 H100s: 18 NVLink lanes of 20 GB/s, 18 channels, bus
    # min(20*18*0.92, 18*36.7) = 331.2 GB/s, scaled by 8/14; bytes accessed in + out = 2 GiB.
    k = one("f32[268435456] all-reduce(p), to_apply=add, replica_groups=[1,8]<=[8], use_global_device_ids=true, "
            "channel_id=1", param="f32[268435456]")
    e = xc.get_model("xla-gpu").estimate(k, H100)
    effective = 331.2 * float(__import__("numpy").float32(8 / 14))
    assert e.memory_s == pytest.approx(2 * 2 ** 30 / (effective * 1e9), rel=1e-9)
    assert e.launch_s == 5e-6 and e.details["rule"] == "nccl-ring (XLA)"
    # the reduction: sm_90 cycles of an f32 add per element, spread over 32 channels of 640 threads
    flops = H100.op_cycles("add", "f32") * 268435456
    assert e.compute_s == pytest.approx(flops // 32 / int(2 * 1.98 * 32 * 128) * 1e-9, abs=1e-9)
    assert e.time_s == pytest.approx(e.compute_s + e.memory_s + e.launch_s)
    # one device: the launch only; a -done: nothing
    solo = xc.get_model("xla-gpu").estimate(one("f32[1024] all-reduce(p), to_apply=add, replica_groups={}"), H100)
    assert solo.time_s == 5e-6


ALL_OPS = """  p = f32[1024] parameter(0)
  ar = f32[1024] all-reduce(p), to_apply=add, replica_groups=[1,8]<=[8], use_global_device_ids=true, channel_id=1
  ag = f32[8192] all-gather(p), replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, channel_id=2
  rs = f32[128] reduce-scatter(p), to_apply=add, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, channel_id=3
  a2a = f32[1024] all-to-all(p), replica_groups=[2,4]<=[8], dimensions={0}, channel_id=4
  cp = f32[1024] collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}, channel_id=5
  ars = f32[1024] all-reduce-start(p), to_apply=add, replica_groups=[4,2]<=[8], use_global_device_ids=true, channel_id=6
  ard = f32[1024] all-reduce-done(ars)
  ags = (f32[1024], f32[8192]) all-gather-start(p), replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, channel_id=7
  agd = f32[8192] all-gather-done(ags)
  cps = (f32[1024], f32[1024]) collective-permute-start(p), source_target_pairs={{0,4},{1,5},{2,6},{3,7}}, channel_id=8
  cpd = f32[1024] collective-permute-done(cps)
  tok = token[] after-all()
  snd = (f32[1024], u32[], token[]) send(p, tok), channel_id=9
  sd = token[] send-done(snd), channel_id=9
  rcv = (f32[1024], u32[], token[]) recv(tok), channel_id=10
  rd = (f32[1024], token[]) recv-done(rcv), channel_id=10
  ROOT t = (f32[1024], f32[8192], f32[128], f32[1024], f32[1024], f32[1024], f32[8192], f32[1024], token[]) tuple(ar, ag, rs, a2a, cp, ard, agd, cpd, sd)"""


@pytest.mark.parametrize("model", ["xla-gpu", "xla-gpu-tables", "roofline"])
def test_every_collective_is_priced(model):
    m = module(ALL_OPS, ", replica_count=1, num_partitions=8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = xc.analyze(m, device="h100-sxm", model=model)
    t = table.set_index("kernel")
    starts = ["ar", "ag", "rs", "a2a", "cp", "ars", "ags", "cps", "snd"]
    assert t.loc[starts, "priced"].all() and (t.loc[starts, "time_s"] > 0).all()
    assert (t.loc[["ard", "agd", "cpd", "sd", "rd"], "time_s"] == 0).all()
    if model == "xla-gpu-tables":
        # every collective of this 8-GPU pattern is in the H100 table
        for k in ("ar", "ag", "rs", "a2a", "cp", "ars", "ags", "cps"):
            assert "collective table sm_90" in table.estimates[k].details["rule"], k


def test_unknown_group_size_is_said():
    k = one("f32[1024] all-to-all(p), replica_groups={{0,1,2},{3,4}}, dimensions={0}, channel_id=1")
    with pytest.warns(xc.models.CostModelWarning, match="group size is not known"):
        e = xc.get_model("roofline").estimate(k, H100)
    assert not e.priced


def test_collectives_beyond_a_host_use_the_sol_model():
    # 16 GPUs over two hosts of 8: not in the H100 table, so XLA's SoL model for the network part.
    k = one("f32[1048576] all-reduce(p), to_apply=add, replica_groups=[1,16]<=[16], use_global_device_ids=true, "
            "channel_id=1", ", replica_count=1, num_partitions=16", param="f32[1048576]")
    e = xc.get_model("xla-gpu-tables").estimate(k, H100)
    assert e.details["rule"].startswith("sol multi host world level")
    cfg = sol_config(H100)
    ring = SolModel(cfg).ring_latency(4 << 20, 2, "all-reduce", 1)
    assert e.time_s == pytest.approx(ring + e.details["hbm_s"] + e.compute_s, rel=1e-9)


def test_the_table_rows_are_all_reachable():
    # Every measured H100 row, as the HLO collective it timed, is priced from the table at its own time.
    model = xc.get_model("xla-gpu-tables")
    for r in collective_table("h100-sxm").itertuples():
        k = xc.parse_hlo(collective_row_hlo(r)).entry.root
        e = model.estimate(k, H100)
        assert e.time_s == pytest.approx(r.time_s, rel=1e-9), (r.opcode, r.replica_groups, r.transfer_bytes)
