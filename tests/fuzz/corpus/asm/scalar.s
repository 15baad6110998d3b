# Expected encodings of scalar-unit instructions (opcode in bits 63..56).
.target tiny
    nop                          # ENC: 0x0100000000000000
    halt                         # ENC: 0x0200000000000000
    add s1, s2, s3               # ENC: 0x0808860000000000
    sub s31, s0, s1              # ENC: 0x09f8020000000000
    mul s4, s5, s6               # ENC: 0x0a214c0000000000
    sltu s1, s1, s1              # ENC: 0x1208420000000000
    max s2, s3, s4               # ENC: 0x1510c80000000000
    addi s1, s2, -1              # ENC: 0x20088000ffffffff
    slli s7, s7, 63              # ENC: 0x2539c0000000003f
    li s1, 0x7fffffff            # ENC: 0x290800007fffffff
    li s2, -2147483648           # ENC: 0x2910000080000000
    lih s3, 1                    # ENC: 0x2a18000000000001
    lds s1, s2, 8                # ENC: 0x3008800000000008
    sts s3, s4, -8               # ENC: 0x31190000fffffff8
here:
    beq s1, s2, here             # ENC: 0x3808800000000000
    bne s1, s0, . + 2            # ENC: 0x3908000000000002
    bgeu s30, s31, here          # ENC: 0x3df7c000fffffffe
    jmp here                     # ENC: 0x3e000000fffffffd
    loop s9, . - 100             # ENC: 0x3f480000ffffff9c
    csrr s1, cycle               # ENC: 0x400a000000000000
    csrr s2, chip                # ENC: 0x4010000000000000
