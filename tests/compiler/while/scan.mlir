// lax.scan over stacked weights (12 layers): h = tanh(h @ ws[i] + b[i]), ys[i] = h; the
// index normalised as JAX does (i < 0 ? i + 12 : i).
module @jit_main {
  func.func public @main(%h0: tensor<8x128xf32>, %ws: tensor<12x128x128xf32>, %bs: tensor<12x128xf32>) -> (tensor<8x128xf32>, tensor<12x8x128xf32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %fz = stablehlo.constant dense<0.0> : tensor<f32>
    %ys0 = stablehlo.broadcast_in_dim %fz, dims = [] : (tensor<f32>) -> tensor<12x8x128xf32>
    %w:5 = stablehlo.while(%i = %zero, %h = %h0, %ys = %ys0, %wsl = %ws, %bsl = %bs) : tensor<i32>, tensor<8x128xf32>, tensor<12x8x128xf32>, tensor<12x128x128xf32>, tensor<12x128xf32>
     cond {
      %n = stablehlo.constant dense<12> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %l = stablehlo.constant dense<12> : tensor<i32>
      %neg = stablehlo.compare LT, %i, %z, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %wrap = stablehlo.add %i, %l : tensor<i32>
      %j = stablehlo.select %neg, %wrap, %i : tensor<i1>, tensor<i32>
      %w3 = stablehlo.dynamic_slice %wsl, %j, %z, %z, sizes = [1, 128, 128] : (tensor<12x128x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x128x128xf32>
      %w2 = stablehlo.reshape %w3 : (tensor<1x128x128xf32>) -> tensor<128x128xf32>
      %b2 = stablehlo.dynamic_slice %bsl, %j, %z, sizes = [1, 128] : (tensor<12x128xf32>, tensor<i32>, tensor<i32>) -> tensor<1x128xf32>
      %b1 = stablehlo.reshape %b2 : (tensor<1x128xf32>) -> tensor<128xf32>
      %d = stablehlo.dot_general %h, %w2, contracting_dims = [1] x [0] : (tensor<8x128xf32>, tensor<128x128xf32>) -> tensor<8x128xf32>
      %bb = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<128xf32>) -> tensor<8x128xf32>
      %s = stablehlo.add %d, %bb : tensor<8x128xf32>
      %h1 = stablehlo.tanh %s : tensor<8x128xf32>
      %y = stablehlo.reshape %h1 : (tensor<8x128xf32>) -> tensor<1x8x128xf32>
      %ys1 = stablehlo.dynamic_update_slice %ys, %y, %j, %z, %z : (tensor<12x8x128xf32>, tensor<1x8x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<12x8x128xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %h1, %ys1, %wsl, %bsl : tensor<i32>, tensor<8x128xf32>, tensor<12x8x128xf32>, tensor<12x128x128xf32>, tensor<12x128xf32>
     }
    return %w#1, %w#2 : tensor<8x128xf32>, tensor<12x8x128xf32>
  }
}
