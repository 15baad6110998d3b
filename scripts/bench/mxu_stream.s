# Benchmark program: a large matmul on MXU 0. x (ROWS x N, bf16) streams
# through one N x N weight tile ITER times, accumulating: ROWS * ITER rows of
# N * N MACs each.
.equ N, target.mxu_dim
.equ ROWS, 4096
.equ ITER, 16
.equ X, 0
.equ W, ROWS * N * 2
.input x, bf16[ROWS, N], X
.input w, bf16[N, N], W
.output y, f32[N], W + N * N * 2

    li s1, X
    li s2, ROWS * N * 2
    dma.ld s1, s1, s2, sem0
    li s3, W
    li s4, N * N * 2
    dma.ld s3, s3, s4, sem1
    li s5, N * 2
    li s6, ROWS
    li s7, 0
    li s8, ITER
    wait mxu0, sem1, 1
    mxu.lw m0, s3, s5, bf16
    mxu.swap m0
    wait mxu0, sem0, 1
top:
    mxu.mma m0, s7, s1, s5, s6, bf16
    loop s8, top
    signal mxu0, sem2, 1
    wait sc, sem2, 1
    halt
