// fori_loop: x = x * 0.5 + 1, 1,000 trips (the test also compiles it for 20,000).
module @jit_main {
  func.func public @main(%x: tensor<8x128xf32>) -> (tensor<8x128xf32>, tensor<i32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %w:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<8x128xf32>
     cond {
      %n = stablehlo.constant dense<1000> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<0.5> : tensor<8x128xf32>
      %m = stablehlo.multiply %v, %h : tensor<8x128xf32>
      %o = stablehlo.constant dense<1.0> : tensor<8x128xf32>
      %v1 = stablehlo.add %m, %o : tensor<8x128xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<8x128xf32>
     }
    return %w#1, %w#0 : tensor<8x128xf32>, tensor<i32>
  }
}
