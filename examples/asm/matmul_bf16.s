# y = x @ w for one N x N tile on MXU 0, N = target.mxu_dim (8 on tiny, 128
# on v5e): bf16 inputs, f32 results. Assemble for a machine with
#   tpu-as matmul_bf16.s --config tiny -o matmul_bf16.tpu
#
# DMA brings x and w into VMEM, the MXU loads w as its weights and streams the
# rows of x through them into the accumulators, the VPU moves the accumulator
# rows to VMEM (it assumes target.vpu_lanes == N, as in every preset), and DMA
# writes them to HBM. Semaphores order the units.
.equ N, target.mxu_dim
.equ TILE16, N * N * 2       # bytes of a bf16 tile
.equ TILE32, N * N * 4       # bytes of an f32 tile
.equ X, 0                    # HBM addresses; VMEM uses the same offsets
.equ W, TILE16
.equ Y, 2 * TILE16
.input  x, bf16[N, N], X
.input  w, bf16[N, N], W
.output y, f32[N, N],  Y

    li s1, X
    li s2, W
    li s3, Y
    li s4, TILE16
    dma.ld s1, s1, s4, sem0  # x
    dma.ld s2, s2, s4, sem1  # w

    li s5, N * 2             # row stride of a bf16 tile
    li s6, 0                 # first accumulator row
    li s7, N                 # rows to stream
    wait mxu0, sem1, 1       # w has landed
    mxu.lw m0, s2, s5, bf16
    mxu.swap m0
    wait mxu0, sem0, 1       # x has landed
    mxu.mm m0, s6, s1, s5, s7, bf16
    signal mxu0, sem2, 1

    wait vpu, sem2, 1        # the accumulators hold y
    li s9, N
    li s13, 0
    li s14, Y
rows:
    vlda v0, s13, 0
    vst.f32 v0, s14, 0
    addi s13, s13, 1
    addi s14, s14, N * 4
    loop s9, rows
    signal vpu, sem3, 1

    wait dma, sem3, 1
    li s8, TILE32
    dma.st s3, s3, s8, sem4
    wait sc, sem4, 1
    halt
