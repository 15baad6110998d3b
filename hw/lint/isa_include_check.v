// Lint-only check that the generated ISA include is valid Verilog and that
// its opcode and field macros decode an instruction word. The MXU RTL will
// use the same include (issue: hw/ RTL of the MXU).
`include "tpu_isa.vh"

module isa_include_check (
    /* verilator lint_off UNUSEDSIGNAL */  // only some fields are decoded here
    input  wire [`TPU_INSN_BITS-1:0] insn_i,
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                      is_mxu_mm_o,
    output wire [4:0]                rows_reg_o
);
  assign is_mxu_mm_o = insn_i[`TPU_OPCODE_HI:`TPU_OPCODE_LO] == `TPU_OP_MXU_MM;
  assign rows_reg_o  = insn_i[`TPU_F_MMM_RROWS_HI:`TPU_F_MMM_RROWS_LO];
endmodule
