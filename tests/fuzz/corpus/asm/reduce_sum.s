# Column sums and the total of an f32[8, 8] matrix on the VPU (preset tiny).
.target tiny
.input  x,     f32[8, 8], 0x000
.output cols,  f32[8],    0x100
.output total, f32[],     0x120

.equ N, 8

    li s1, 0
    li s2, N * N * 4
    dma.ld s1, s1, s2, sem0
    wait vpu, sem0, 1

    vli v0, 0                        # running column sums
    li s3, N
    li s4, 0
acc:
    vld.f32 v1, s4, 0
    vadd.f32 v0, v0, v1
    addi s4, s4, N * 4
    loop s3, acc
    vredsum.f32 v2, v0               # every lane = the total
    li s5, 0x100
    vst.f32 v0, s5, 0
    vst.f32 v2, s5, N * 4
    signal vpu, sem1, 1

    wait dma, sem1, 1
    li s6, N * 4
    dma.st s5, s5, s6, sem2          # column sums
    li s7, 0x120
    li s8, 4
    dma.st s7, s7, s8, sem2          # one lane of the total
    wait sc, sem2, 2
    halt
