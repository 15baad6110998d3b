# Expected encodings of sync, DMA, MXU and VPU instructions.
.target v5e
    wait sc, sem0, 1             # ENC: 0x4100000000000001
    wait mxu3, sem63, 65535      # ENC: 0x41bfc0000000ffff
    signal dma, sem2, 2          # ENC: 0x4210800000000002
    dma.ld s1, s2, s3, sem4      # ENC: 0x4808862000000000
    dma.st s31, s30, s29, sem63  # ENC: 0x49ffbbf800000000
    dma.ld2d s1, s2, s3, s4, s5, s6, sem7 # ENC: 0x4a08864298700000
    dma.rcp s1, s2, s3, s4, sem5 # ENC: 0x4c08864140000000
    dma.rsig s1, sem3, 7         # ENC: 0x4d08600000000007
    dma.csig s2, sem63, 1        # ENC: 0x4e17e00000000001
    mxu.lw m0, s1, s2, bf16      # ENC: 0x5001100000000000
    mxu.lwt m3, s1, s2, s8       # ENC: 0x5161140000000000
    mxu.swap m7                  # ENC: 0x52e0000000000000
    mxu.mm m1, s1, s2, s3, s4, bf16 # ENC: 0x532110c800000000
    mxu.mma m2, s31, s31, s31, s31, s8 # ENC: 0x545fffff00000000
    vld.bf16 v1, s2, 16          # ENC: 0x6208800000000010
    vst.s8 v31, s1, -1           # ENC: 0x67f84000ffffffff
    vlda v2, s3, 0               # ENC: 0x6810c00000000000
    vli v3, 0x3f800000           # ENC: 0x6c1800003f800000
    vli v3, -1                   # ENC: 0x6c180000ffffffff
    viota v4                     # ENC: 0x6d20000000000000
    vxpose s1, s2                # ENC: 0x6e08800000000000
    vadd.f32 v1, v2, v3          # ENC: 0x7008860000000000
    vsel v1, v2, v3, v4          # ENC: 0xae08864000000000
    vclamp.s32 v5, v6, v7, v8    # ENC: 0xb4298e8000000000
    vredmax.s32 v9, v10          # ENC: 0xc44a800000000000
