// mxu_top: one MXU with its control, taking the MXU instructions of the ISA
// (opcodes from the generated tpu_isa.vh) one at a time, with the timing of
// docs/timing.md:
//   mxu.lw/lwt  accepted when no load runs, the shadow buffer is not waiting
//               for a swap, and every row that used it will have drained by
//               the commit; reads weight row i in cycle t + i and commits the
//               tile at t + N - 1
//   mxu.swap    accepted once the shadow buffer is loaded
//   mxu.mm/mma  accepted when the previous stream has fed its last row; feeds
//               row i in cycle t + i; its result row is written to the
//               accumulators in cycle t + i + 2N - 1 (mma adds to the old value)
// VMEM and accumulator reads are combinational (the data for an address
// output arrives in the same cycle).
`include "tpu_isa.vh"

module mxu_top #(
    parameter int N = 8
) (
    input  wire              clk_i,
    input  wire              rst_ni,
    // One instruction: opcode and its operands as the scalar unit read them.
    input  wire              cmd_valid_i,
    output wire              cmd_ready_o,
    input  wire [7:0]        cmd_op_i,
    input  wire [31:0]       cmd_src_i,     // VMEM address of row 0
    input  wire [31:0]       cmd_stride_i,  // bytes between rows
    input  wire [31:0]       cmd_acc_i,     // first accumulator row (mm/mma)
    input  wire [31:0]       cmd_rows_i,    // rows to stream (mm/mma)
    input  wire              cmd_int8_i,    // dtype: 1 = s8, 0 = bf16
    // VMEM read ports: N operands' bytes (2N for bf16, N for s8) at the address.
    output wire              w_rd_en_o,
    output wire [31:0]       w_rd_addr_o,
    input  wire [N*16-1:0]   w_rd_data_i,
    output wire              in_rd_en_o,
    output wire [31:0]       in_rd_addr_o,
    input  wire [N*16-1:0]   in_rd_data_i,
    // Accumulator port: read and write one row.
    output wire              acc_we_o,
    output wire [31:0]       acc_row_o,
    output wire [N*32-1:0]   acc_wdata_o,
    input  wire [N*32-1:0]   acc_rdata_i,
    output wire              idle_o,        // every accepted instruction has completed
    output wire [63:0]       done_at_o,     // the cycle from which idle_o holds if nothing more is accepted
    output wire              active_o,      // work remains after this cycle (valid after the clock edge)
    output wire              busy_o,        // loading, streaming, or rows in flight besides the one written now
    output reg               error_o        // a stream's dtype differed from its weights'
);
  localparam int Lat = 2 * N - 1;  // feed to accumulator write
  localparam logic [63:0] Lat64 = 64'(Lat);
  localparam logic [63:0] N64 = 64'(N);

  reg [63:0] now_q;

  // Operands of a VMEM row, as the array takes them.
  function automatic [N*16-1:0] operands(input [N*16-1:0] raw, input int8);
    integer e;
    for (e = 0; e < N; e = e + 1)
      operands[16*e+:16] = int8 ? {{8{raw[8*e+7]}}, raw[8*e+:8]} : raw[16*e+:16];
  endfunction

  // ---- Weights: load into staging, commit into the shadow buffer ----------
  reg             loading_q, load_tr_q, load_int8_q;
  reg [31:0]      load_src_q, load_stride_q, load_cnt_q;
  reg [N*N*16-1:0] stage_q;
  reg             shadow_loaded_q, active_valid_q, active_q;
  reg             buf_int8_q[2];
  reg [63:0]      drained_q[2];
  reg [63:0]      last_complete_q;
  reg [63:0]      load_done_q;      // the cycle after the last weight load's last row

  wire shadow_idx = active_valid_q ? ~active_q : 1'b0;
  wire is_lw = cmd_op_i == `TPU_OP_MXU_LW || cmd_op_i == `TPU_OP_MXU_LWT;
  wire is_swap = cmd_op_i == `TPU_OP_MXU_SWAP;
  wire is_mm = cmd_op_i == `TPU_OP_MXU_MM || cmd_op_i == `TPU_OP_MXU_MMA;

  // ---- Input stream -----------------------------------------------------------
  reg        streaming_q, stream_acc_mode_q, stream_int8_q, stream_buf_q;
  reg [31:0] stream_src_q, stream_stride_q, stream_rows_q, stream_cnt_q, stream_acc_q;

  wire accept_lw = !loading_q && !shadow_loaded_q && now_q + N64 - 64'd1 >= drained_q[shadow_idx];
  wire accept_mm = !streaming_q && active_valid_q;
  assign cmd_ready_o = is_lw ? accept_lw : is_swap ? shadow_loaded_q : is_mm ? accept_mm : 1'b0;
  wire fire = cmd_valid_i && cmd_ready_o;
  wire fire_lw = fire && is_lw;
  wire fire_mm = fire && is_mm && cmd_rows_i != 32'd0;

  // Weight row read this cycle.
  wire        w_row_active = fire_lw || loading_q;
  wire [31:0] w_row = fire_lw ? 32'd0 : load_cnt_q;
  wire        w_tr = fire_lw ? cmd_op_i == `TPU_OP_MXU_LWT : load_tr_q;
  wire        w_int8 = fire_lw ? cmd_int8_i : load_int8_q;
  assign w_rd_en_o = w_row_active;
  assign w_rd_addr_o = fire_lw ? cmd_src_i : load_src_q + load_cnt_q * load_stride_q;
  wire [N*16-1:0] w_row_data = operands(w_rd_data_i, w_int8);
  wire        w_commit = w_row_active && w_row == N - 1;

  // The staging tile with this cycle's row merged in (what a commit writes).
  reg [N*N*16-1:0] stage_d;
  integer c;
  always @(*) begin
    stage_d = stage_q;
    if (w_row_active)
      for (c = 0; c < N; c = c + 1)
        if (w_tr) stage_d[16*(c*N+w_row)+:16] = w_row_data[16*c+:16];
        else stage_d[16*(w_row*N+c)+:16] = w_row_data[16*c+:16];
  end

  // Input row fed this cycle.
  wire        feed = fire_mm || streaming_q;
  wire [31:0] feed_idx = fire_mm ? 32'd0 : stream_cnt_q;
  wire        feed_int8 = fire_mm ? cmd_int8_i : stream_int8_q;
  wire        feed_buf = fire_mm ? active_q : stream_buf_q;
  assign in_rd_en_o = feed;
  assign in_rd_addr_o = fire_mm ? cmd_src_i : stream_src_q + stream_cnt_q * stream_stride_q;

  wire [N*32-1:0] res;
  mxu_array #(.N(N)) u_array (
      .clk_i      (clk_i),
      .row_valid_i(feed),
      .row_i      (operands(in_rd_data_i, feed_int8)),
      .row_buf_i  (feed_buf),
      .row_int8_i (feed_int8),
      .w_we_i     (w_commit),
      .w_sel_i    (shadow_idx),
      .w_i        (stage_d),
      .res_o      (res)
  );

  // Row metadata travels Lat cycles beside the array.
  reg        meta_valid_q[Lat];
  reg        meta_mode_q[Lat];  // 1 = accumulate
  reg        meta_int8_q[Lat];
  reg [31:0] meta_row_q[Lat];

  // ---- Accumulator write: Lat cycles after the feed -------------------------
  assign acc_we_o = meta_valid_q[Lat-1];
  assign acc_row_o = meta_row_q[Lat-1];
  genvar j;
  generate
    for (j = 0; j < N; j = j + 1) begin : g_acc
      wire [31:0] old = acc_rdata_i[32*j+:32];
      wire [31:0] val = res[32*j+:32];
      wire [31:0] sum_f32;
      mxu_f32_add u_acc_add (.a_i(old), .b_i(val), .s_o(sum_f32));
      assign acc_wdata_o[32*j+:32] = !meta_mode_q[Lat-1] ? val : meta_int8_q[Lat-1] ? old + val : sum_f32;
    end
  endgenerate

  assign idle_o = !loading_q && !streaming_q && now_q >= last_complete_q;
  assign done_at_o = last_complete_q > load_done_q ? last_complete_q : load_done_q;
  assign active_o = loading_q || streaming_q || now_q <= last_complete_q;
  reg rows_in_flight;
  integer f;
  always @(*) begin
    rows_in_flight = 1'b0;
    for (f = 0; f < Lat - 1; f = f + 1) rows_in_flight = rows_in_flight | meta_valid_q[f];
  end
  assign busy_o = loading_q || streaming_q || rows_in_flight;

  wire [63:0] mm_done = now_q + {32'd0, cmd_rows_i} - 64'd1 + Lat64;
  wire [63:0] lw_done = now_q + N64 - 64'd1;
  integer s;
  always @(posedge clk_i) begin
    if (!rst_ni) begin
      now_q <= 64'd0;
      loading_q <= 1'b0;
      shadow_loaded_q <= 1'b0;
      active_valid_q <= 1'b0;
      active_q <= 1'b0;
      streaming_q <= 1'b0;
      drained_q[0] <= 64'd0;
      drained_q[1] <= 64'd0;
      last_complete_q <= 64'd0;
      load_done_q <= 64'd0;
      error_o <= 1'b0;
      for (s = 0; s < Lat; s = s + 1) meta_valid_q[s] <= 1'b0;
    end else begin
      now_q <= now_q + 64'd1;
      // Weights.
      if (fire_lw) begin
        load_src_q <= cmd_src_i;
        load_stride_q <= cmd_stride_i;
        load_tr_q <= cmd_op_i == `TPU_OP_MXU_LWT;
        load_int8_q <= cmd_int8_i;
        if (lw_done > last_complete_q) last_complete_q <= lw_done;
        load_done_q <= now_q + N64;
      end
      if (w_row_active) begin
        stage_q <= stage_d;
        load_cnt_q <= w_row + 32'd1;
        loading_q <= !w_commit;
      end
      if (w_commit) begin
        shadow_loaded_q <= 1'b1;
        buf_int8_q[shadow_idx] <= w_int8;
      end
      if (fire && is_swap) begin
        active_valid_q <= 1'b1;
        active_q <= shadow_idx;
        shadow_loaded_q <= 1'b0;
      end
      // Streams.
      if (fire && is_mm && cmd_int8_i != buf_int8_q[active_q]) error_o <= 1'b1;
      if (fire_mm) begin
        stream_src_q <= cmd_src_i;
        stream_stride_q <= cmd_stride_i;
        stream_rows_q <= cmd_rows_i;
        stream_acc_q <= cmd_acc_i;
        stream_acc_mode_q <= cmd_op_i == `TPU_OP_MXU_MMA;
        stream_int8_q <= cmd_int8_i;
        stream_buf_q <= active_q;
        drained_q[active_q] <= mm_done;
        if (mm_done > last_complete_q) last_complete_q <= mm_done;
      end
      if (feed) begin
        stream_cnt_q <= feed_idx + 32'd1;
        streaming_q <= feed_idx + 32'd1 < (fire_mm ? cmd_rows_i : stream_rows_q);
      end
      meta_valid_q[0] <= feed;
      meta_mode_q[0] <= fire_mm ? cmd_op_i == `TPU_OP_MXU_MMA : stream_acc_mode_q;
      meta_int8_q[0] <= feed_int8;
      meta_row_q[0] <= (fire_mm ? cmd_acc_i : stream_acc_q) + feed_idx;
      for (s = 1; s < Lat; s = s + 1) begin
        meta_valid_q[s] <= meta_valid_q[s-1];
        meta_mode_q[s] <= meta_mode_q[s-1];
        meta_int8_q[s] <= meta_int8_q[s-1];
        meta_row_q[s] <= meta_row_q[s-1];
      end
    end
  end
endmodule
