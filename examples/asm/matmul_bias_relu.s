# y = relu(x @ w + b) for one N x N tile, N = target.mxu_dim: the bias and the
# activation are applied by the VPU as accumulator rows are read out (the
# matmul epilogue). Assumes target.vpu_lanes == N.
.equ N, target.mxu_dim
.equ TILE16, N * N * 2
.equ X, 0
.equ W, TILE16
.equ B, 2 * TILE16
.equ Y, 2 * TILE16 + N * 4
.input  x, bf16[N, N], X
.input  w, bf16[N, N], W
.input  b, f32[N],     B
.output y, f32[N, N],  Y

    li s1, X
    li s2, W
    li s3, B
    li s4, TILE16
    li s5, N * 4
    dma.ld s1, s1, s4, sem0          # HBM and VMEM offsets coincide
    dma.ld s2, s2, s4, sem1
    dma.ld s3, s3, s5, sem2

    li s6, N * 2
    li s7, 0
    li s8, N
    wait mxu0, sem1, 1
    mxu.lw m0, s2, s6, bf16
    mxu.swap m0
    wait mxu0, sem0, 1
    mxu.mm m0, s7, s1, s6, s8, bf16
    signal mxu0, sem3, 1

    wait vpu, sem2, 1
    vld.f32 v1, s3, 0                # bias row
    vli v2, 0x00000000               # 0.0f
    wait vpu, sem3, 1
    li s9, N
    li s13, 0
    li s14, Y
rows:
    vlda v0, s13, 0
    vadd.f32 v0, v0, v1
    vmax.f32 v0, v0, v2
    vst.f32 v0, s14, 0
    addi s13, s13, 1
    addi s14, s14, N * 4
    loop s9, rows
    signal vpu, sem4, 1

    wait dma, sem4, 1
    li s10, N * N * 4
    li s11, Y
    dma.st s11, s11, s10, sem5
    wait sc, sem5, 1
    halt
