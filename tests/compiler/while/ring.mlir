// A ring buffer in a loop's state: trip i reads buf[i & 3] and writes
// buf[(i + 1) & 3], so a slice is read from the value that the same body
// updates (11 trips).
module @jit_main {
  func.func public @main(%b0: tensor<4x8x128xf32>) -> (tensor<4x8x128xf32>, tensor<8x128xf32>) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %fz = stablehlo.constant dense<0.0> : tensor<f32>
    %a0 = stablehlo.broadcast_in_dim %fz, dims = [] : (tensor<f32>) -> tensor<8x128xf32>
    %w:3 = stablehlo.while(%i = %zero, %buf = %b0, %acc = %a0) : tensor<i32>, tensor<4x8x128xf32>, tensor<8x128xf32>
     cond {
      %n = stablehlo.constant dense<11> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
     } do {
      %z = stablehlo.constant dense<0> : tensor<i32>
      %three = stablehlo.constant dense<3> : tensor<i32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %r = stablehlo.and %i, %three : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %r1 = stablehlo.and %i1, %three : tensor<i32>
      %v3 = stablehlo.dynamic_slice %buf, %r, %z, %z, sizes = [1, 8, 128] : (tensor<4x8x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x128xf32>
      %v = stablehlo.reshape %v3 : (tensor<1x8x128xf32>) -> tensor<8x128xf32>
      %h = stablehlo.constant dense<0.5> : tensor<8x128xf32>
      %vh = stablehlo.multiply %v, %h : tensor<8x128xf32>
      %u = stablehlo.add %vh, %acc : tensor<8x128xf32>
      %u3 = stablehlo.reshape %u : (tensor<8x128xf32>) -> tensor<1x8x128xf32>
      %buf1 = stablehlo.dynamic_update_slice %buf, %u3, %r1, %z, %z : (tensor<4x8x128xf32>, tensor<1x8x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x8x128xf32>
      %acc1 = stablehlo.add %acc, %v : tensor<8x128xf32>
      stablehlo.return %i1, %buf1, %acc1 : tensor<i32>, tensor<4x8x128xf32>, tensor<8x128xf32>
     }
    return %w#1, %w#2 : tensor<4x8x128xf32>, tensor<8x128xf32>
  }
}
