# Column sums and the total of an f32[L, L] matrix on the VPU, L = target.vpu_lanes.
.equ L, target.vpu_lanes
.equ X, 0
.equ COLS, L * L * 4
.equ TOTAL, COLS + L * 4
.input  x,     f32[L, L], X
.output cols,  f32[L],    COLS
.output total, f32[],     TOTAL

    li s1, X
    li s2, L * L * 4
    dma.ld s1, s1, s2, sem0
    wait vpu, sem0, 1

    vli v0, 0                        # running column sums
    li s3, L
    li s4, X
acc:
    vld.f32 v1, s4, 0
    vadd.f32 v0, v0, v1
    addi s4, s4, L * 4
    loop s3, acc
    vredsum.f32 v2, v0               # every lane = the total
    li s5, COLS
    vst.f32 v0, s5, 0
    vst.f32 v2, s5, L * 4            # TOTAL: the first lane is what we keep
    signal vpu, sem1, 1

    wait dma, sem1, 1
    li s6, L * 4
    dma.st s5, s5, s6, sem2          # column sums
    li s7, TOTAL
    li s8, 4
    dma.st s7, s7, s8, sem2          # one lane of the total
    wait sc, sem2, 2
    halt
