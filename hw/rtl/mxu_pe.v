// mxu_pe: one processing element of the weight-stationary array.
//
// Holds two weights (double buffer) and, per cycle, takes the operand from
// its left neighbour and the partial sum from the PE above:
//   psum_q <= add(psum_i, mul(x_i, w[buf_i]))   (bf16 -> f32, or s8 -> s32)
//   x_q    <= x_i, with its row's buffer select and dtype
// Latency: one cycle to the right (x) and one cycle down (psum).
module mxu_pe (
    input  wire        clk_i,
    input  wire [15:0] x_i,        // bf16 bits, or an s8 value sign-extended
    input  wire        buf_i,      // weight buffer of the row this operand belongs to
    input  wire        int8_i,     // the row's dtype: 1 = s8, 0 = bf16
    input  wire [31:0] psum_i,     // f32 bits or s32 from the PE above (0 for the top row)
    input  wire        w_we_i,     // load both weight registers' selected buffer
    input  wire        w_sel_i,
    input  wire [15:0] w_data_i,
    output wire [15:0] x_o,
    output wire        buf_o,
    output wire        int8_o,
    output wire [31:0] psum_o
);
  reg [15:0] w0_q, w1_q;
  reg [15:0] x_q;
  reg        buf_q, int8_q;
  reg [31:0] psum_q;

  wire [15:0] w = buf_i ? w1_q : w0_q;
  wire [31:0] prod_f32;
  wire [31:0] sum_f32;
  mxu_bf16_mul u_mul (.a_i(x_i), .b_i(w), .p_o(prod_f32));
  mxu_f32_add u_add (.a_i(psum_i), .b_i(prod_f32), .s_o(sum_f32));
  wire [31:0] prod_s32 = {{16{x_i[15]}}, x_i} * {{16{w[15]}}, w};
  wire [31:0] sum_s32 = psum_i + prod_s32;

  always @(posedge clk_i) begin
    x_q    <= x_i;
    buf_q  <= buf_i;
    int8_q <= int8_i;
    psum_q <= int8_i ? sum_s32 : sum_f32;
    if (w_we_i && !w_sel_i) w0_q <= w_data_i;
    if (w_we_i && w_sel_i) w1_q <= w_data_i;
  end

  assign x_o = x_q;
  assign buf_o = buf_q;
  assign int8_o = int8_q;
  assign psum_o = psum_q;
endmodule
