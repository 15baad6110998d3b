// The check dialect written directly (older testdata): *_const checks against a literal, and
// expect_close with its own ULP bound. s32 iota + 3, and f32 x / 4.
module {
  func.func @main() {
    %x = stablehlo.constant dense<[1.0, -2.0, 6.0, 0.5]> : tensor<4xf32>
    %q = stablehlo.constant dense<4.0> : tensor<4xf32>
    %d = stablehlo.divide %x, %q : tensor<4xf32>
    check.expect_almost_eq_const %d, dense<[0.25, -0.5, 1.5, 0.125]> : tensor<4xf32>
    %i = stablehlo.iota dim = 0 : tensor<4xi32>
    %c = stablehlo.constant dense<3> : tensor<4xi32>
    %s = stablehlo.add %i, %c : tensor<4xi32>
    check.expect_eq_const %s, dense<[3, 4, 5, 6]> : tensor<4xi32>
    %e = stablehlo.constant dense<[0.25, -0.5, 1.5, 0.125]> : tensor<4xf32>
    check.expect_close %d, %e, max_ulp_difference = 0 : tensor<4xf32>, tensor<4xf32>
    return
  }
}
