"""Small hand-written HLO modules for the cost-analysis tests.

Each exercises opcodes or attribute combinations that the zoo fixtures do not
(dilated and grouped convolutions, reduce-window's reduce+broadcast case,
fusions with tuple outputs and in-place updates, collectives, control flow,
...). The tests run each through jaxlib's `hlo_module_cost_analysis` and ours.
"""

from __future__ import annotations

_ADD_F32 = """
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
}
"""

_MAX_F32 = """
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

_GE_F32 = """
ge_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
"""


def _module(name: str, body: str, *helpers: str) -> str:
    return f"HloModule {name}\n" + "".join(helpers) + body


PROGRAMS: dict[str, str] = {}


def _add(name: str, body: str, *helpers: str) -> None:
    PROGRAMS[name] = _module(name, body, *helpers)


_add("dot_batch", """
ENTRY e {
  a = f32[4,8,16]{2,1,0} parameter(0)
  b = f32[4,16,32]{2,1,0} parameter(1)
  ROOT d = f32[4,8,32]{2,1,0} dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
""")

_add("dot_two_contracting", """
ENTRY e {
  a = f32[6,5,7]{2,1,0} parameter(0)
  b = f32[5,7,3]{2,1,0} parameter(1)
  ROOT d = f32[6,3]{1,0} dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}
""")

_add("conv_padded_strided", """
ENTRY e {
  x = f32[2,9,9,3]{3,2,1,0} parameter(0)
  w = f32[3,3,3,8]{3,2,1,0} parameter(1)
  ROOT c = f32[2,5,5,8]{3,2,1,0} convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}
""")

_add("conv_dilated", """
ENTRY e {
  x = f32[1,10,10,4]{3,2,1,0} parameter(0)
  w = f32[3,3,4,6]{3,2,1,0} parameter(1)
  ROOT c = f32[1,19,6,6]{3,2,1,0} convolution(x, w), window={size=3x3 pad=1_1x0_0 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f
}
""")

_add("conv_feature_groups", """
ENTRY e {
  x = f32[2,8,8,6]{3,2,1,0} parameter(0)
  w = f32[3,3,2,12]{3,2,1,0} parameter(1)
  ROOT c = f32[2,8,8,12]{3,2,1,0} convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=3
}
""")

_add("conv_batch_groups", """
ENTRY e {
  x = f32[4,6,6,2]{3,2,1,0} parameter(0)
  w = f32[3,3,2,4]{3,2,1,0} parameter(1)
  ROOT c = f32[1,4,4,4]{3,2,1,0} convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4
}
""")

_add("conv_1x1_nchw", """
ENTRY e {
  x = f32[2,16,7,7]{3,2,1,0} parameter(0)
  w = f32[32,16,1,1]{3,2,1,0} parameter(1)
  ROOT c = f32[2,32,7,7]{3,2,1,0} convolution(x, w), window={size=1x1}, dim_labels=bf01_oi01->bf01
}
""")

_add("reduce_window_pool", """
ENTRY e {
  x = f32[2,8,8,3]{3,2,1,0} parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[2,4,4,3]{3,2,1,0} reduce-window(x, z), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=max_f32
}
""", _MAX_F32)

_add("reduce_window_cumsum", """
ENTRY e {
  x = f32[4,16]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,16]{1,0} reduce-window(x, z), window={size=1x16 pad=0_0x15_0}, to_apply=add_f32
}
""", _ADD_F32)

_add("reduce_window_reduce_broadcast", """
ENTRY e {
  x = f32[4,16]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4,16]{1,0} reduce-window(x, z), window={size=1x31 pad=0_0x15_15}, to_apply=add_f32
}
""", _ADD_F32)

_add("select_and_scatter", """
ENTRY e {
  x = f32[2,8,8,3]{3,2,1,0} parameter(0)
  s = f32[2,4,4,3]{3,2,1,0} parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[2,8,8,3]{3,2,1,0} select-and-scatter(x, s, z), window={size=1x2x2x1 stride=1x2x2x1}, select=ge_f32, scatter=add_f32
}
""", _ADD_F32, _GE_F32)

_add("gather_rows", """
ENTRY e {
  t = f32[100,16]{1,0} parameter(0)
  i = s32[10,1]{1,0} parameter(1)
  ROOT g = f32[10,16]{1,0} gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
}
""")

_add("scatter_add", """
ENTRY e {
  t = f32[100,16]{1,0} parameter(0)
  i = s32[10,1]{1,0} parameter(1)
  u = f32[10,16]{1,0} parameter(2)
  ROOT s = f32[100,16]{1,0} scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
}
""", _ADD_F32)

_add("scatter_variadic", """
add2 {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  r0 = f32[] add(a, c)
  r1 = s32[] add(b, d)
  ROOT t = (f32[], s32[]) tuple(r0, r1)
}
ENTRY e {
  t0 = f32[50]{0} parameter(0)
  t1 = s32[50]{0} parameter(1)
  i = s32[8,1]{1,0} parameter(2)
  up0 = f32[8]{0} parameter(3)
  up1 = s32[8]{0} parameter(4)
  ROOT s = (f32[50]{0}, s32[50]{0}) scatter(t0, t1, i, up0, up1), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add2
}
""")

_add("dynamic_slices", """
ENTRY e {
  x = f32[12,4,8]{2,1,0} parameter(0)
  u = f32[1,4,8]{2,1,0} parameter(1)
  k = s32[] parameter(2)
  z = s32[] constant(0)
  ds = f32[1,4,8]{2,1,0} dynamic-slice(x, k, z, z), dynamic_slice_sizes={1,4,8}
  n = f32[1,4,8]{2,1,0} negate(ds)
  a = f32[1,4,8]{2,1,0} add(n, u)
  ROOT dus = f32[12,4,8]{2,1,0} dynamic-update-slice(x, a, k, z, z)
}
""")

_add("data_movement", """
ENTRY e {
  x = f32[8,6]{1,0} parameter(0)
  y = f32[8,6]{1,0} parameter(1)
  z = f32[] constant(0)
  p = f32[10,13]{1,0} pad(x, z), padding=1_1x0_2_1
  c = f32[16,6]{1,0} concatenate(x, y), dimensions={0}
  r = f32[16,6]{1,0} reverse(c), dimensions={0}
  s = f32[4,3]{1,0} slice(r), slice={[0:16:4], [0:6:2]}
  t = f32[6,8]{0,1} transpose(x), dimensions={1,0}
  t2 = f32[6,8]{1,0} transpose(x), dimensions={1,0}
  b = f32[3,8,6]{2,1,0} broadcast(x), dimensions={1,2}
  rs = f32[48]{0} reshape(y)
  bc = f32[6,8]{1,0} bitcast(x)
  io = s32[5,7]{1,0} iota(), iota_dimension=1
  cp = f32[8,6]{0,1} copy(x)
  cv = s32[8,6]{1,0} convert(x)
  bcv = s32[8,6]{1,0} bitcast-convert(x)
  rp = f32[8,6]{1,0} reduce-precision(x), exponent_bits=5, mantissa_bits=10
  ROOT tup = (f32[10,13]{1,0}, f32[4,3]{1,0}, f32[6,8]{0,1}, f32[6,8]{1,0}, f32[3,8,6]{2,1,0}, f32[48]{0}, f32[6,8]{1,0}, s32[5,7]{1,0}, f32[8,6]{0,1}, s32[8,6]{1,0}, s32[8,6]{1,0}, f32[8,6]{1,0}) tuple(p, s, t, t2, b, rs, bc, io, cp, cv, bcv, rp)
}
""")

_add("select_clamp_compare", """
ENTRY e {
  x = f32[32]{0} parameter(0)
  y = f32[32]{0} parameter(1)
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  c = pred[32]{0} compare(x, y), direction=LT
  s = f32[32]{0} select(c, x, y)
  cl = f32[32]{0} clamp(lo, s, hi)
  ROOT a = f32[32]{0} atan2(cl, y)
}
""")

_add("sort_pair", """
lt_kv {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = f32[4,100]{1,0} parameter(0)
  v = s32[4,100]{1,0} parameter(1)
  ROOT s = (f32[4,100]{1,0}, s32[4,100]{1,0}) sort(k, v), dimensions={1}, to_apply=lt_kv
}
""")

_add("fft_2d", """
ENTRY e {
  x = c64[3,16,32]{2,1,0} parameter(0)
  ROOT f = c64[3,16,32]{2,1,0} fft(x), fft_type=FFT, fft_length={16,32}
}
""")

_add("rfft", """
ENTRY e {
  x = f32[5,64]{1,0} parameter(0)
  ROOT f = c64[5,33]{1,0} fft(x), fft_type=RFFT, fft_length={64}
}
""")

_add("rng_ops", """
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[10,10]{1,0} rng(lo, hi), distribution=rng_uniform
  st = u64[2]{0} parameter(0)
  g = (u64[2]{0}, u32[16,8]{1,0}) rng-bit-generator(st), algorithm=rng_philox
  g1 = u32[16,8]{1,0} get-tuple-element(g), index=1
  ROOT t = (f32[10,10]{1,0}, u32[16,8]{1,0}) tuple(r, g1)
}
""")

_add("linalg_ops", """
ENTRY e {
  a = f32[3,8,8]{2,1,0} parameter(0)
  b = f32[3,8,5]{2,1,0} parameter(1)
  l = f32[3,8,8]{2,1,0} cholesky(a), lower=true
  ROOT x = f32[3,8,5]{2,1,0} triangular-solve(l, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
}
""")

_add("map_op", """
ENTRY e {
  x = f32[20]{0} parameter(0)
  y = f32[20]{0} parameter(1)
  ROOT m = f32[20]{0} map(x, y), dimensions={0}, to_apply=add_f32
}
""", _ADD_F32)

_add("reduce_variadic", """
argmax {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  gt = pred[] compare(a, c), direction=GT
  v = f32[] select(gt, a, c)
  i = s32[] select(gt, b, d)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[6,40]{1,0} parameter(0)
  io = s32[6,40]{1,0} iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[6]{0}, s32[6]{0}) reduce(x, io, ninf, z), dimensions={1}, to_apply=argmax
}
""")

_add("while_counted", """
body {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[16]{0} get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  e = f32[16]{0} exponential(x)
  y = f32[16]{0} multiply(e, x)
  ROOT t = (s32[], f32[16]{0}) tuple(i1, y)
}
cond {
  p = (s32[], f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[16]{0} parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[16]{0}) tuple(z, x)
  w = (s32[], f32[16]{0}) while(t), condition=cond, body=body
  ROOT r = f32[16]{0} get-tuple-element(w), index=1
}
""")

_add("conditional_branches", """
b0 {
  p = f32[8]{0} parameter(0)
  ROOT e = f32[8]{0} exponential(p)
}
b1 {
  p = f32[8]{0} parameter(0)
  a = f32[8]{0} add(p, p)
  ROOT m = f32[8]{0} multiply(a, p)
}
b2 {
  p = f32[8]{0} parameter(0)
  ROOT n = f32[8]{0} negate(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[8]{0} parameter(1)
  ROOT c = f32[8]{0} conditional(k, x, x, x), branch_computations={b0, b1, b2}
}
""")

_add("call_and_custom_call", """
sub {
  p = f32[8,8]{1,0} parameter(0)
  ROOT t = f32[8,8]{1,0} tanh(p)
}
ENTRY e {
  x = f32[8,8]{1,0} parameter(0)
  c = f32[8,8]{1,0} call(x), to_apply=sub
  ROOT cc = f32[8,8]{1,0} custom-call(c), custom_call_target="my_kernel"
}
""")

_add("fusion_slices_broadcast", """
fused {
  p0 = f32[64,32]{1,0} parameter(0)
  p1 = f32[32]{0} parameter(1)
  sl0 = f32[16,32]{1,0} slice(p0), slice={[0:16], [0:32]}
  sl1 = f32[16,32]{1,0} slice(p0), slice={[16:32], [0:32]}
  b = f32[16,32]{1,0} broadcast(p1), dimensions={1}
  a = f32[16,32]{1,0} add(sl0, sl1)
  ROOT m = f32[16,32]{1,0} multiply(a, b)
}
ENTRY e {
  x = f32[64,32]{1,0} parameter(0)
  y = f32[32]{0} parameter(1)
  ROOT f = f32[16,32]{1,0} fusion(x, y), kind=kLoop, calls=fused
}
""")

_add("fusion_tuple_dus", """
fused {
  p0 = f32[12,8]{1,0} parameter(0)
  p1 = f32[1,8]{1,0} parameter(1)
  p2 = s32[] parameter(2)
  z = s32[] constant(0)
  e = f32[1,8]{1,0} exponential(p1)
  d = f32[12,8]{1,0} dynamic-update-slice(p0, e, p2, z)
  ds = f32[1,8]{1,0} dynamic-slice(p0, p2, z), dynamic_slice_sizes={1,8}
  c = f32[4,8]{1,0} constant({{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8},{1,2,3,4,5,6,7,8}})
  r = f32[96]{0} reshape(p0)
  ROOT t = (f32[12,8]{1,0}, f32[1,8]{1,0}) tuple(d, ds)
}
ENTRY e {
  x = f32[12,8]{1,0} parameter(0)
  u = f32[1,8]{1,0} parameter(1)
  k = s32[] parameter(2)
  ROOT f = (f32[12,8]{1,0}, f32[1,8]{1,0}) fusion(x, u, k), kind=kLoop, calls=fused
}
""")

_add("fusion_reduce_gather", """
fused {
  p0 = f32[100,16]{1,0} parameter(0)
  p1 = s32[10,1]{1,0} parameter(1)
  g = f32[10,16]{1,0} gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
  z = f32[] constant(0)
  ROOT r = f32[10]{0} reduce(g, z), dimensions={1}, to_apply=add_f32
}
ENTRY e {
  t = f32[100,16]{1,0} parameter(0)
  i = s32[10,1]{1,0} parameter(1)
  ROOT f = f32[10]{0} fusion(t, i), kind=kInput, calls=fused
}
""", _ADD_F32)

_add("fusion_custom_gather", """
fused {
  p0 = f32[100,16]{1,0} parameter(0)
  p1 = s32[10,1]{1,0} parameter(1)
  ROOT g = f32[10,16]{1,0} gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
}
ENTRY e {
  t = f32[100,16]{1,0} parameter(0)
  i = s32[10,1]{1,0} parameter(1)
  ROOT f = f32[10,16]{1,0} fusion(t, i), kind=kCustom, calls=fused
}
""")

_add("fusion_tuple_param", """
fused {
  p0 = (f32[8]{0}, f32[4]{0}) parameter(0)
  a = f32[8]{0} get-tuple-element(p0), index=0
  ROOT n = f32[8]{0} negate(a)
}
ENTRY e {
  x = f32[8]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  t = (f32[8]{0}, f32[4]{0}) tuple(x, y)
  ROOT f = f32[8]{0} fusion(t), kind=kLoop, calls=fused
}
""")

_add("nested_fusion", """
inner {
  q0 = f32[32]{0} parameter(0)
  ROOT s = f32[32]{0} sqrt(q0)
}
outer {
  p0 = f32[32]{0} parameter(0)
  p1 = f32[32]{0} parameter(1)
  f = f32[32]{0} fusion(p0), kind=kLoop, calls=inner
  sl = f32[8]{0} slice(f), slice={[0:8]}
  ROOT a = f32[8]{0} add(sl, sl)
}
ENTRY e {
  x = f32[32]{0} parameter(0)
  y = f32[32]{0} parameter(1)
  ROOT o = f32[8]{0} fusion(x, y), kind=kLoop, calls=outer
}
""")

_add("collectives", """
ENTRY e {
  x = f32[64]{0} parameter(0)
  ar = f32[64]{0} all-reduce(x), replica_groups={}, to_apply=add_f32
  ag = f32[128]{0} all-gather(ar), replica_groups={}, dimensions={0}
  rs = f32[32]{0} reduce-scatter(ag), replica_groups={}, dimensions={0}, to_apply=add_f32
  a2a = f32[32]{0} all-to-all(rs), replica_groups={}, dimensions={0}
  cp = f32[32]{0} collective-permute(a2a), source_target_pairs={{0,1},{1,0}}
  ROOT t = (f32[64]{0}, f32[32]{0}) tuple(ar, cp)
}
""", _ADD_F32)

_add("async_and_tokens", """
ENTRY e {
  x = f32[64]{0} parameter(0)
  tok = token[] after-all()
  ars = f32[64]{0} all-reduce-start(x), replica_groups={}, to_apply=add_f32
  ard = f32[64]{0} all-reduce-done(ars)
  cs = (f32[64]{0}, f32[64]{0}, u32[]) copy-start(ard)
  cd = f32[64]{0} copy-done(cs)
  ad = f32[64]{0} add-dependency(cd, tok)
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  ROOT t = (f32[64]{0}, u32[], u32[]) tuple(ad, pid, rid)
}
""", _ADD_F32)

_add("unknown_shapes_and_opt_barrier", """
ENTRY e {
  x = f32[8]{0} parameter(0)
  y = s4[16]{0} parameter(1)
  z = pred[8]{0} parameter(2)
  t = (f32[8]{0}, s4[16]{0}, pred[8]{0}) tuple(x, y, z)
  o = (f32[8]{0}, s4[16]{0}, pred[8]{0}) opt-barrier(t)
  a = f32[8]{0} get-tuple-element(o), index=0
  b = f32[8]{0} add(a, a)
  ROOT r = (f32[8]{0}, s4[16]{0}) tuple(b, y)
}
""")

_add("dead_code_and_order", """
ENTRY e {
  x = f32[4096]{0} parameter(0)
  dead = f32[4096]{0} exponential(x)
  a = f32[4096]{0} multiply(x, x)
  b = f32[4096]{0} add(a, x)
  ROOT c = f32[4096]{0} subtract(b, a)
}
""")

_add("scan_op", """
scan_body {
  a = f32[] parameter(0)
  b = f32[3] parameter(1)
  q = f32[] parameter(2)
  e = f32[] exponential(q)
  s = f32[] add(a, e)
  n = f32[3] negate(b)
  ROOT t = (f32[], f32[3]) tuple(s, n)
}
ENTRY e {
  p0 = f32[5,3]{1,0} parameter(0)
  p1 = f32[5]{0} parameter(1)
  c = f32[] constant(0)
  ROOT r = (f32[], f32[5,3]{1,0}) scan(c, p0, p1), dimensions={0}, num_carries=1, to_apply=scan_body
}
""")

_add("mulhi_op", """
ENTRY e {
  a = s32[64]{0} parameter(0)
  b = s32[64]{0} parameter(1)
  ROOT m = s32[64]{0} mulhi(a, b)
}
""")

_add("dynamic_shape", """
ENTRY e {
  p0 = f32[<=8,4]{1,0} parameter(0)
  ROOT n = f32[<=8,4]{1,0} negate(p0)
}
""")

_add("element_types", """
ENTRY e {
  a = s4[33]{0} parameter(0)
  b = u4[33]{0} parameter(1)
  c = bf16[7]{0} parameter(2)
  d = c128[3]{0} parameter(3)
  e = pred[5]{0} parameter(4)
  f = f8e4m3fn[9]{0} parameter(5)
  g = s4[33]{0:E(4)} parameter(6)
  a2 = s4[33]{0} add(a, a)
  b2 = u4[33]{0} add(b, b)
  c2 = bf16[7]{0} add(c, c)
  d2 = c128[3]{0} add(d, d)
  e2 = pred[5]{0} and(e, e)
  f2 = f8e4m3fn[9]{0} add(f, f)
  g2 = s4[33]{0:E(4)} add(g, g)
  ROOT t = (s4[33]{0}, u4[33]{0}, bf16[7]{0}, c128[3]{0}, pred[5]{0}, f8e4m3fn[9]{0}, s4[33]{0:E(4)}) tuple(a2, b2, c2, d2, e2, f2, g2)
}
""")

_add("send_recv_feeds", """
ENTRY e {
  tok = token[] after-all()
  r = (f32[16]{0}, u32[], token[]) recv(tok), channel_id=1
  rd = (f32[16]{0}, token[]) recv-done(r), channel_id=1
  d = f32[16]{0} get-tuple-element(rd), index=0
  snd = (f32[16]{0}, u32[], token[]) send(d, tok), channel_id=2
  sd = token[] send-done(snd), channel_id=2
  i = ((f32[16]{0}, s32[2]{0}), token[]) infeed(tok)
  dd = (f32[16]{0}, s32[2]{0}) get-tuple-element(i), index=0
  t2 = token[] get-tuple-element(i), index=1
  o = token[] outfeed(dd, t2), outfeed_shape=(f32[16]{0}, s32[2]{0})
  ROOT x = f32[16]{0} negate(d)
}
""")

_add("big_dot_f32_rounding", """
ENTRY e {
  a = f32[1023,1001]{1,0} parameter(0)
  b = f32[1001,999]{1,0} parameter(1)
  d = f32[1023,999]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[1023,999]{1,0} cosine(d)
  ROOT t = f32[1023,999]{1,0} add(d, c)
}
""")


def names() -> list[str]:
    return sorted(PROGRAMS)
