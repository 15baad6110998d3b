// A loop of 10 trips around one of 12; the inner body has a constant of several values (hoisted out of both loops).
module @jit_main {
  func.func public @main(%x: tensor<8x128xf32>) -> (tensor<8x128xf32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<8x128xf32>
     cond {
      %n = stablehlo.constant dense<10> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %z = stablehlo.constant dense<0> : tensor<i32>
      %s:2 = stablehlo.while(%j = %z, %u = %v) : tensor<i32>, tensor<8x128xf32>
       cond {
        %m = stablehlo.constant dense<12> : tensor<i32>
        %lt2 = stablehlo.compare LT, %j, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt2 : tensor<i1>
       } do {
        %o = stablehlo.constant dense<1> : tensor<i32>
        %j1 = stablehlo.add %j, %o : tensor<i32>
        %c = stablehlo.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<1x8xf32>
        %cb = stablehlo.reshape %c : (tensor<1x8xf32>) -> tensor<8xf32>
        %b = stablehlo.broadcast_in_dim %cb, dims = [0] : (tensor<8xf32>) -> tensor<8x128xf32>
        %k = stablehlo.constant dense<0.25> : tensor<8x128xf32>
        %uu = stablehlo.multiply %u, %k : tensor<8x128xf32>
        %u1 = stablehlo.add %uu, %b : tensor<8x128xf32>
        stablehlo.return %j1, %u1 : tensor<i32>, tensor<8x128xf32>
       }
      %v1 = stablehlo.add %s#1, %v : tensor<8x128xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<8x128xf32>
     }
    return %r#1 : tensor<8x128xf32>
  }
}
