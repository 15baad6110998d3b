// 12 trips of x = tanh(x @ (transpose(w) / 32) + 2 b + slice(pad(b) + pad(x))), a contraction
// (rounding errors do not grow from trip to trip): transpose(w) / 32, its bf16 parts and 2 b do not
// change from trip to trip (hoist-loop-invariants computes them once, before the loop); pad(b) does
// not either, but it is twice b's size, so it stays in the body.
module @jit_main {
  func.func public @main(%x: tensor<8x128xf32>, %w: tensor<128x128xf32>, %b: tensor<8x128xf32>) -> (tensor<8x128xf32>, tensor<i32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:4 = stablehlo.while(%i = %zero, %v = %x, %ww = %w, %bb = %b) : tensor<i32>, tensor<8x128xf32>, tensor<128x128xf32>, tensor<8x128xf32>
     cond {
      %n = stablehlo.constant dense<12> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %wt = stablehlo.transpose %ww, dims = [1, 0] : (tensor<128x128xf32>) -> tensor<128x128xf32>
      %s = stablehlo.constant dense<0.03125> : tensor<128x128xf32>
      %ws = stablehlo.multiply %wt, %s : tensor<128x128xf32>
      %d = stablehlo.dot_general %v, %ws, contracting_dims = [1] x [0] : (tensor<8x128xf32>, tensor<128x128xf32>) -> tensor<8x128xf32>
      %two = stablehlo.constant dense<2.0> : tensor<8x128xf32>
      %b2 = stablehlo.multiply %bb, %two : tensor<8x128xf32>
      %pz = stablehlo.constant dense<0.0> : tensor<f32>
      %p = stablehlo.pad %bb, %pz, low = [4, 0], high = [4, 0], interior = [0, 0] : (tensor<8x128xf32>, tensor<f32>) -> tensor<16x128xf32>
      %pv = stablehlo.pad %v, %pz, low = [0, 0], high = [8, 0], interior = [0, 0] : (tensor<8x128xf32>, tensor<f32>) -> tensor<16x128xf32>
      %q = stablehlo.add %p, %pv : tensor<16x128xf32>
      %ps = stablehlo.slice %q [2:10, 0:128] : (tensor<16x128xf32>) -> tensor<8x128xf32>
      %s1 = stablehlo.add %d, %b2 : tensor<8x128xf32>
      %s2 = stablehlo.add %s1, %ps : tensor<8x128xf32>
      %t = stablehlo.tanh %s2 : tensor<8x128xf32>
      stablehlo.return %i1, %t, %ww, %bb : tensor<i32>, tensor<8x128xf32>, tensor<128x128xf32>, tensor<8x128xf32>
     }
    return %r#1, %r#0 : tensor<8x128xf32>, tensor<i32>
  }
}
