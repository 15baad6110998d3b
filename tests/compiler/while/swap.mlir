// 13 trips whose body returns one state element in another's place: (p, q) -> (q, tanh(p @ w) + q).
module @jit_main {
  func.func public @main(%a: tensor<4x256xf32>, %b: tensor<4x256xf32>, %w: tensor<256x256xf32>) -> (tensor<4x256xf32>, tensor<4x256xf32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:3 = stablehlo.while(%i = %zero, %p = %a, %q = %b) : tensor<i32>, tensor<4x256xf32>, tensor<4x256xf32>
     cond {
      %n = stablehlo.constant dense<13> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %d = stablehlo.dot_general %p, %w, contracting_dims = [1] x [0] : (tensor<4x256xf32>, tensor<256x256xf32>) -> tensor<4x256xf32>
      %t = stablehlo.tanh %d : tensor<4x256xf32>
      %s = stablehlo.add %t, %q : tensor<4x256xf32>
      stablehlo.return %i1, %q, %s : tensor<i32>, tensor<4x256xf32>, tensor<4x256xf32>
     }
    return %r#1, %r#2 : tensor<4x256xf32>, tensor<4x256xf32>
  }
}
