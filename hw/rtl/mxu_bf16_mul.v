// mxu_bf16_mul: the MXU's bf16 x bf16 multiplier (combinational).
//
// The product of two bf16 values is exact in f32 (8-bit x 8-bit
// significands). Numerics as sim/mxu/numerics.h: subnormal operands count
// as signed zeros; a product whose exact magnitude is below 2^-126 becomes a
// signed zero; overflow gives infinity; any NaN result is 32'h7fc00000.
module mxu_bf16_mul (
    input  wire [15:0] a_i,
    input  wire [15:0] b_i,
    output reg  [31:0] p_o
);
  wire       sign = a_i[15] ^ b_i[15];
  wire [7:0] ea = a_i[14:7];
  wire [7:0] eb = b_i[14:7];
  wire [6:0] fa = a_i[6:0];
  wire [6:0] fb = b_i[6:0];

  wire a_zero = ea == 8'd0;
  wire b_zero = eb == 8'd0;
  wire a_inf = ea == 8'hff && fa == 7'd0;
  wire b_inf = eb == 8'hff && fb == 7'd0;
  wire a_nan = ea == 8'hff && fa != 7'd0;
  wire b_nan = eb == 8'hff && fb != 7'd0;

  wire [15:0] m = {1'b1, fa} * {1'b1, fb};  // in [2^14, 2^16)
  // Biased exponent of the product: ea + eb - 127, plus one if m >= 2^15.
  wire signed [10:0] e = $signed({3'b0, ea}) + $signed({3'b0, eb}) - 11'sd127 + (m[15] ? 11'sd1 : 11'sd0);
  wire [22:0] frac = m[15] ? {m[14:0], 8'd0} : {m[13:0], 9'd0};

  always @(*) begin
    if (a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero))
      p_o = 32'h7fc00000;
    else if (a_inf || b_inf)
      p_o = {sign, 8'hff, 23'd0};
    else if (a_zero || b_zero || e <= 11'sd0)
      p_o = {sign, 31'd0};
    else if (e >= 11'sd255)
      p_o = {sign, 8'hff, 23'd0};
    else
      p_o = {sign, e[7:0], frac};
  end
endmodule
