// while_loop with a data-dependent predicate: v = 1.5 v + x while sum(|v|) < lim (a reduce moved to the scalar unit).
module @jit_main {
  func.func public @main(%x: tensor<16x128xf32>, %lim: tensor<f32>) -> (tensor<16x128xf32>, tensor<i32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %w:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<16x128xf32>
     cond {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %a = stablehlo.abs %v : tensor<16x128xf32>
      %s = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<16x128xf32>, tensor<f32>) -> tensor<f32>
      %lt = stablehlo.compare LT, %s, %lim, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.constant dense<1.5> : tensor<16x128xf32>
      %m = stablehlo.multiply %v, %h : tensor<16x128xf32>
      %v1 = stablehlo.add %m, %x : tensor<16x128xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<16x128xf32>
     }
    return %w#1, %w#0 : tensor<16x128xf32>, tensor<i32>
  }
}
