# y = x @ w on one 8x8 MXU (preset tiny): bf16 inputs, f32 results.
#
# DMA brings x and w into VMEM, the MXU loads w as its weights and streams the
# rows of x through them into the accumulators, the VPU moves the accumulator
# rows to VMEM, and DMA writes them to HBM. Semaphores order the units.
.target tiny
.input  x, bf16[8, 8], 0x000
.input  w, bf16[8, 8], 0x080
.output y, f32[8, 8],  0x100

.equ N, 8
.equ VX, 0x000              # VMEM addresses
.equ VW, 0x080
.equ VY, 0x100

    li s1, VX
    li s2, VW
    li s3, VY
    li s4, N * N * 2         # bytes of one bf16 tile
    li s10, 0x000            # HBM x
    li s11, 0x080            # HBM w
    dma.ld s1, s10, s4, sem0
    dma.ld s2, s11, s4, sem1

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
    li s14, VY
rows:
    vlda v0, s13, 0
    vst.f32 v0, s14, 0
    addi s13, s13, 1
    addi s14, s14, N * 4
    loop s9, rows
    signal vpu, sem3, 1

    wait dma, sem3, 1
    li s8, N * N * 4
    li s12, 0x100            # HBM y
    dma.st s12, s3, s8, sem4
    wait sc, sem4, 1
    halt
