// A data-dependent loop (n is an input) over dynamic slices whose starts are
// computed each trip: some run past either end of their dimension and are
// clamped (XLA), one piece is strided (the inner dimension's start moves),
// the update is bf16 and written in place into the loop's state; q adds up
// two contiguous pieces, one read where it lies and one copied out.
module @jit_main {
  func.func public @main(%table: tensor<16x4x64xf32>, %n: tensor<i32>) -> (tensor<2x64xf32>, tensor<16x4x96xbf16>, tensor<1x4x64xf32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %fz = stablehlo.constant dense<0.0> : tensor<f32>
    %acc0 = stablehlo.broadcast_in_dim %fz, dims = [] : (tensor<f32>) -> tensor<2x64xf32>
    %bz = stablehlo.constant dense<0.0> : tensor<bf16>
    %t0 = stablehlo.broadcast_in_dim %bz, dims = [] : (tensor<bf16>) -> tensor<16x4x96xbf16>
    %q0 = stablehlo.broadcast_in_dim %fz, dims = [] : (tensor<f32>) -> tensor<1x4x64xf32>
    %w:5 = stablehlo.while(%i = %zero, %acc = %acc0, %t = %t0, %m = %n, %q = %q0) : tensor<i32>, tensor<2x64xf32>, tensor<16x4x96xbf16>, tensor<i32>, tensor<1x4x64xf32>
     cond {
      %lt = stablehlo.compare LT, %i, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %three = stablehlo.constant dense<3> : tensor<i32>
      %two = stablehlo.constant dense<2> : tensor<i32>
      %i3 = stablehlo.multiply %i, %three : tensor<i32>
      %row = stablehlo.subtract %i3, %two : tensor<i32>
      %p3 = stablehlo.dynamic_slice %table, %row, %i, %z, sizes = [1, 2, 64] : (tensor<16x4x64xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x64xf32>
      %p = stablehlo.reshape %p3 : (tensor<1x2x64xf32>) -> tensor<2x64xf32>
      %h = stablehlo.constant dense<0.5> : tensor<2x64xf32>
      %a = stablehlo.multiply %acc, %h : tensor<2x64xf32>
      %acc1 = stablehlo.add %a, %p : tensor<2x64xf32>
      %ab = stablehlo.convert %acc1 : (tensor<2x64xf32>) -> tensor<2x64xbf16>
      %u = stablehlo.reshape %ab : (tensor<2x64xbf16>) -> tensor<1x2x64xbf16>
      %fifteen = stablehlo.constant dense<15> : tensor<i32>
      %back = stablehlo.subtract %fifteen, %i : tensor<i32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %seven = stablehlo.constant dense<7> : tensor<i32>
      %col = stablehlo.multiply %i, %seven : tensor<i32>
      %t1 = stablehlo.dynamic_update_slice %t, %u, %back, %one, %col : (tensor<16x4x96xbf16>, tensor<1x2x64xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x4x96xbf16>
      %s1 = stablehlo.dynamic_slice %table, %i, %z, %z, sizes = [1, 4, 64] : (tensor<16x4x64xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x64xf32>
      %s2 = stablehlo.dynamic_slice %table, %back, %z, %z, sizes = [1, 4, 64] : (tensor<16x4x64xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x4x64xf32>
      %s12 = stablehlo.add %s1, %s2 : tensor<1x4x64xf32>
      %q1 = stablehlo.add %q, %s12 : tensor<1x4x64xf32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %acc1, %t1, %m, %q1 : tensor<i32>, tensor<2x64xf32>, tensor<16x4x96xbf16>, tensor<i32>, tensor<1x4x64xf32>
     }
    return %w#1, %w#2, %w#4 : tensor<2x64xf32>, tensor<16x4x96xbf16>, tensor<1x4x64xf32>
  }
}
