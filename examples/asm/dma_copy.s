# Copy 64 KiB from one HBM tensor to another through VMEM, 4 KiB at a time
# with two buffers, so that the load of chunk i+1 overlaps the store of chunk
# i: a DMA-bound program.
.equ BYTES, 65536
.equ CHUNK, 4096
.equ SRC, 0
.equ DST, BYTES
.input  src, u8[BYTES], SRC
.output dst, u8[BYTES], DST

    li s1, SRC              # HBM read pointer
    li s2, DST              # HBM write pointer
    li s3, CHUNK
    li s4, 0                # VMEM buffer A
    li s5, CHUNK            # VMEM buffer B
    li s6, BYTES / CHUNK / 2  # iterations, two chunks each
    dma.ld s4, s1, s3, sem0
loop_top:
    addi s1, s1, CHUNK
    dma.ld s5, s1, s3, sem1 # prefetch into B
    wait dma, sem0, 1
    dma.st s2, s4, s3, sem2 # drain A
    addi s2, s2, CHUNK
    addi s1, s1, CHUNK
    wait dma, sem2, 1       # A is free again
    wait dma, sem1, 1
    dma.st s2, s5, s3, sem2 # drain B
    addi s2, s2, CHUNK
    li s7, 1
    beq s6, s7, last        # no prefetch after the final pair
    dma.ld s4, s1, s3, sem0
last:
    wait dma, sem2, 1       # B is free again
    loop s6, loop_top
    signal dma, sem4, 1
    wait sc, sem4, 1
    halt
