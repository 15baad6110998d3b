// mxu_array: the N x N weight-stationary systolic array with its input skew
// and output de-skew.
//
// A row presented on row_* in cycle c has element k enter PE(k, 0) in cycle
// c + k; PE(k, j) works on it in cycle c + k + j; column j leaves the bottom
// row in cycle c + N - 1 + j and is delayed N - 1 - j cycles more, so the
// whole result row is on res_o in cycle c + 2N - 1 (latency 2N - 1).
// Weight loads write every PE's selected buffer at once.
module mxu_array #(
    parameter int N = 8
) (
    input  wire              clk_i,
    input  wire              row_valid_i,
    input  wire [N*16-1:0]   row_i,      // element k in bits [16k+15:16k]
    input  wire              row_buf_i,
    input  wire              row_int8_i,
    input  wire              w_we_i,
    input  wire              w_sel_i,
    input  wire [N*N*16-1:0] w_i,        // weight of PE(k, j) in bits [16(kN+j)+15 -: 16]
    output wire [N*32-1:0]   res_o       // column j in bits [32j+31:32j]
);
  // Skew: element k of a row waits k cycles before PE(k, 0).
  wire [15:0] x_in[N];
  wire        buf_in[N];
  wire        int8_in[N];
  genvar k, j, d;
  generate
    for (k = 0; k < N; k = k + 1) begin : g_skew
      wire [15:0] elem = row_valid_i ? row_i[16*k+:16] : 16'd0;
      if (k == 0) begin : g_direct
        assign x_in[k] = elem;
        assign buf_in[k] = row_buf_i;
        assign int8_in[k] = row_int8_i;
      end else begin : g_delay
        reg [15:0] x_q[k];
        reg        buf_q[k];
        reg        int8_q[k];
        integer i;
        always @(posedge clk_i) begin
          x_q[0] <= elem;
          buf_q[0] <= row_buf_i;
          int8_q[0] <= row_int8_i;
          for (i = 1; i < k; i = i + 1) begin
            x_q[i] <= x_q[i-1];
            buf_q[i] <= buf_q[i-1];
            int8_q[i] <= int8_q[i-1];
          end
        end
        assign x_in[k] = x_q[k-1];
        assign buf_in[k] = buf_q[k-1];
        assign int8_in[k] = int8_q[k-1];
      end
    end
  endgenerate

  // The PEs: x flows right, partial sums flow down.
  wire [15:0] x_w[N][N+1];
  wire        buf_w[N][N+1];
  wire        int8_w[N][N+1];
  wire [31:0] psum_w[N+1][N];
  generate
    for (k = 0; k < N; k = k + 1) begin : g_row
      assign x_w[k][0] = x_in[k];
      assign buf_w[k][0] = buf_in[k];
      assign int8_w[k][0] = int8_in[k];
      for (j = 0; j < N; j = j + 1) begin : g_col
        if (k == 0) begin : g_top
          assign psum_w[0][j] = 32'd0;
        end
        mxu_pe u_pe (
            .clk_i   (clk_i),
            .x_i     (x_w[k][j]),
            .buf_i   (buf_w[k][j]),
            .int8_i  (int8_w[k][j]),
            .psum_i  (psum_w[k][j]),
            .w_we_i  (w_we_i),
            .w_sel_i (w_sel_i),
            .w_data_i(w_i[16*(k*N+j)+:16]),
            .x_o     (x_w[k][j+1]),
            .buf_o   (buf_w[k][j+1]),
            .int8_o  (int8_w[k][j+1]),
            .psum_o  (psum_w[k+1][j])
        );
      end
    end
  endgenerate

  // De-skew: column j is delayed N - 1 - j cycles after the bottom row.
  generate
    for (j = 0; j < N; j = j + 1) begin : g_deskew
      if (j == N - 1) begin : g_direct
        assign res_o[32*j+:32] = psum_w[N][j];
      end else begin : g_delay
        reg [31:0] q[N-1-j];
        always @(posedge clk_i) q[0] <= psum_w[N][j];
        for (d = 1; d < N - 1 - j; d = d + 1) begin : g_stage
          always @(posedge clk_i) q[d] <= q[d-1];
        end
        assign res_o[32*j+:32] = q[N-2-j];
      end
    end
  endgenerate
endmodule
