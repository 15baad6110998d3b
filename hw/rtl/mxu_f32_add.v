// mxu_f32_add: the MXU's f32 adder (combinational).
//
// IEEE 754 binary32 addition with round-to-nearest-even, as in
// sim/mxu/numerics.h: subnormal inputs count as signed zeros, a result whose
// magnitude is below 2^-126 becomes a signed zero (the sign IEEE would give),
// an exact zero from cancellation is +0, overflow gives infinity and any NaN
// result is 32'h7fc00000.
module mxu_f32_add (
    input  wire [31:0] a_i,
    input  wire [31:0] b_i,
    output reg  [31:0] s_o
);
  wire [7:0] ea_in = a_i[30:23];
  wire [7:0] eb_in = b_i[30:23];
  wire a_nan = ea_in == 8'hff && a_i[22:0] != 23'd0;
  wire b_nan = eb_in == 8'hff && b_i[22:0] != 23'd0;
  wire a_inf = ea_in == 8'hff && a_i[22:0] == 23'd0;
  wire b_inf = eb_in == 8'hff && b_i[22:0] == 23'd0;
  wire a_zero = ea_in == 8'd0;
  wire b_zero = eb_in == 8'd0;

  // Order the operands by magnitude: x is the larger.
  wire a_ge = a_i[30:0] >= b_i[30:0];
  wire [31:0] x = a_ge ? a_i : b_i;
  wire [31:0] y = a_ge ? b_i : a_i;
  wire [7:0] ex = x[30:23];
  wire [7:0] ey = y[30:23];
  wire [7:0] d = ex - ey;
  wire subtract = x[31] ^ y[31];

  // Significands with the hidden bit and three extra bits (guard, round, sticky).
  wire [26:0] mx = {1'b1, x[22:0], 3'b000};
  wire [26:0] my_full = {1'b1, y[22:0], 3'b000};
  wire [26:0] my_shift = d >= 8'd27 ? 27'd0 : my_full >> d;
  wire [26:0] lost_mask = d >= 8'd27 ? {27{1'b1}} : ~({27{1'b1}} << d);
  wire sticky_in = (my_full & lost_mask) != 27'd0;
  wire [26:0] my = {my_shift[26:1], my_shift[0] | sticky_in};

  wire [27:0] sum = subtract ? {1'b0, mx} - {1'b0, my} : {1'b0, mx} + {1'b0, my};

  // Normalise: a carry shifts right by one; cancellation shifts left.
  reg [4:0] lz;
  integer i;
  always @(*) begin
    lz = 5'd0;
    for (i = 0; i <= 26; i = i + 1)
      if (sum[i]) lz = 5'd26 - i[4:0];
  end

  reg [26:0] norm;
  reg signed [9:0] e_norm;
  always @(*) begin
    if (sum[27]) begin
      norm = {sum[27:2], sum[1] | sum[0]};
      e_norm = $signed({2'b0, ex}) + 10'sd1;
    end else begin
      norm = sum[26:0] << lz;
      e_norm = $signed({2'b0, ex}) - $signed({5'b0, lz});
    end
  end

  // Round to nearest, ties to even, on bits [2:0] = guard, round, sticky.
  wire        round_up = norm[2] && (norm[1] || norm[0] || norm[3]);
  wire [24:0] rounded = {1'b0, norm[26:3]} + {24'd0, round_up};
  wire [22:0] frac = rounded[24] ? rounded[23:1] : rounded[22:0];
  wire signed [9:0] e_final = rounded[24] ? e_norm + 10'sd1 : e_norm;

  always @(*) begin
    if (a_nan || b_nan || (a_inf && b_inf && a_i[31] != b_i[31]))
      s_o = 32'h7fc00000;
    else if (a_inf)
      s_o = a_i;
    else if (b_inf)
      s_o = b_i;
    else if (a_zero && b_zero)
      s_o = {a_i[31] & b_i[31], 31'd0};
    else if (a_zero)
      s_o = b_i;
    else if (b_zero)
      s_o = a_i;
    else if (sum == 28'd0)
      s_o = 32'd0;
    else if (e_final >= 10'sd255)
      s_o = {x[31], 8'hff, 23'd0};
    else if (e_final <= 10'sd0)
      s_o = {x[31], 31'd0};
    else
      s_o = {x[31], e_final[7:0], frac};
  end
endmodule
