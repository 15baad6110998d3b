// A loop of n trips, n an input: zero, one and more (a negative n runs none).
module @jit_main {
  func.func public @main(%x: tensor<8x128xf32>, %n: tensor<i32>) -> (tensor<8x128xf32>, tensor<i32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %w:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<8x128xf32>
     cond {
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %e = stablehlo.exponential %v : tensor<8x128xf32>
      %v1 = stablehlo.add %e, %x : tensor<8x128xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<8x128xf32>
     }
    return %w#1, %w#0 : tensor<8x128xf32>, tensor<i32>
  }
}
